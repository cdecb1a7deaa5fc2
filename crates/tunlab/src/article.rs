//! `tunlab bench --article NAME`: rebuild a reference article's
//! experiment here (the lab with its matrix, or the PVP search), then
//! check each of its findings against what was measured and say whether
//! it holds here. Each article gets a folder of its own under OUT with
//! its results, `findings.json`, `findings.md` and `article.html`; OUT
//! gets `articles.html` and `findings.md` over all of them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tunlab_lab::article::page::{self, Here};
use tunlab_lab::article::{self, Article, Checked, Experiment, Measured, Spec};
use tunlab_lab::traffic::INTERRUPTED;

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("tunlab bench --article: {e}");
    ExitCode::FAILURE
}

/// What one article's run left: its page's inputs.
struct Done {
    spec: Spec,
    checked: Vec<Checked>,
    here: Here,
}

/// What the command line sets of each article's rounds.
#[derive(Debug, Clone, Copy)]
pub struct Rounds {
    pub rounds: Option<usize>,
    pub budget: Option<u64>,
    pub seed: Option<u64>,
}

pub fn run(names: &str, profile: &str, out: Option<PathBuf>, rounds: Rounds) -> ExitCode {
    let articles = match Article::parse_list(names) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tunlab bench --article: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(n) = rounds.rounds.filter(|n| !(2..=200).contains(n)) {
        eprintln!("tunlab bench --article: --rounds: {n} is not between 2 and 200 (a ratio's interval needs two rounds)");
        return ExitCode::from(2);
    }
    if !matches!(profile, "quick" | "full") {
        eprintln!(
            "tunlab bench --article: --profile: '{profile}' is not a profile; valid: quick, full"
        );
        return ExitCode::from(2);
    }
    let tunlab = match crate::bench::start("bench") {
        Ok(t) => t,
        Err(code) => return code,
    };
    let out = out.unwrap_or_else(tunlab_lab::run::default_out);
    let mut done = Vec::new();
    // Seconds of budget an article's rounds left unused (they ended early:
    // every check clear of its line and within the rule's precision, or
    // the most rounds): the next article's rounds may take them.
    let mut saved = 0;
    for (i, a) in articles.iter().enumerate() {
        let spec = a.spec();
        println!(
            "\n=== article {}/{}: {} — \"{}\" ({}) ===",
            i + 1,
            articles.len(),
            a.name(),
            spec.title,
            spec.date
        );
        let dir = out.join(a.name());
        let measured = match &spec.experiment {
            Experiment::Lab(plan_of) => {
                lab(&spec, plan_of(profile), rounds, &mut saved, &tunlab, &dir)
            }
            Experiment::Pvp => pvp(&spec, profile, &dir),
        };
        let d = match measured {
            Ok(d) => d,
            Err(code) => return code,
        };
        println!("\n{}", page::text(&d.spec, &d.checked));
        let command = format!("tunlab bench --article {} --profile {profile}", a.name());
        if let Err(e) = write_pages(&d, &dir, &command) {
            return fail(e);
        }
        println!("findings: {}", dir.join("article.html").display());
        done.push(d);
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!("tunlab bench --article: interrupted; the articles above are done, the rest were not run");
            return ExitCode::from(130);
        }
    }
    let pages: Vec<(Spec, Vec<Checked>)> = done
        .iter()
        .map(|d| (d.spec.clone(), d.checked.clone()))
        .collect();
    let md: String = done
        .iter()
        .map(|d| {
            let cmd = format!(
                "tunlab bench --article {} --profile {profile}",
                d.spec.article.name()
            );
            page::markdown(&d.spec, &d.checked, &d.here, &cmd)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let written = std::fs::write(out.join("articles.html"), page::index(&pages))
        .and_then(|_| std::fs::write(out.join("findings.md"), md));
    if let Err(e) = written {
        return fail(format!("{}: {e}", out.display()));
    }
    println!("\nevery article:");
    for (s, c) in &pages {
        println!("  {:<16} {}", s.article.name(), page::tally(c));
    }
    println!("pages: {}", out.join("articles.html").display());
    ExitCode::SUCCESS
}

/// The article's lab plan, run; its tables and report as `tunlab bench`
/// writes them; its findings judged. Past the first rounds, the rounds
/// go on only for the cells of checks whose intervals reach the lines
/// their verdicts turn on, and when none does, for the checks not yet
/// settled or wider than the rule's precision
/// (`article::open_cells`); a budget left
/// unused goes into `saved` for the next article, and this one's budget
/// takes what the ones before it left.
fn lab(
    spec: &Spec,
    mut plan: tunlab_lab::plan::Plan,
    rounds: Rounds,
    saved: &mut u64,
    tunlab: &Path,
    dir: &Path,
) -> Result<Done, ExitCode> {
    if let Some(n) = rounds.rounds {
        plan.rule.min_rounds = n;
        plan.rule.max_rounds = n;
        plan.rule.budget_s = None;
    }
    if let Some(b) = rounds.budget {
        plan.rule.budget_s = (b > 0).then_some(b);
    }
    if let Some(b) = &mut plan.rule.budget_s {
        *b += std::mem::take(saved);
    }
    plan.seed = rounds.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!("{}\n", tunlab_lab::run::TOPOLOGY);
    println!("profile {}: {}", plan.profile, plan.method());
    if rounds.rounds.is_none() {
        println!(
            "the article's rule past round {}: only the cells of its checks whose intervals reach their lines go on (both sides of each, paired by round); once none does, those of the checks clear by less than their half-width or wider than ±{}%",
            plan.rule.min_rounds, plan.rule.max_ci_pct
        );
    }
    let started = std::time::Instant::now();
    let open = |r: &tunlab_lab::results::Results| article::open_cells(spec, r);
    let results = tunlab_lab::run::run(&plan, tunlab, dir, None, Some(&open)).map_err(fail)?;
    if let Some(b) = plan.rule.budget_s {
        *saved = b.saturating_sub(started.elapsed().as_secs());
    }
    let base = plan.baseline.map(|b| b.name());
    println!("{}", tunlab_lab::report::tables(&results, base));
    if let Err(e) = tunlab_lab::html::write(&results, base, dir) {
        return Err(fail(format!("cannot write the report: {e}")));
    }
    if results.interrupted {
        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    Ok(Done {
        checked: article::judge(spec, Measured::Lab(&results)),
        here: Here::of_run(&results),
        spec: spec.clone(),
    })
}

/// `tunlab bench --pvp` into `dir`, then its two searches judged.
fn pvp(spec: &Spec, profile: &str, dir: &Path) -> Result<Done, ExitCode> {
    let code = crate::gen::bench_pvp(profile, Some(dir.to_path_buf()));
    if code != ExitCode::SUCCESS {
        return Err(code);
    }
    let rows = |node: &str| -> Result<Vec<article::PvpRow>, ExitCode> {
        let path = dir.join(format!("pvp-{node}.json"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| fail(format!("{}: {e}", path.display())))?;
        article::pvp_rows(&v).map_err(|e| fail(format!("{}: {e}", path.display())))
    };
    let (ebpf, userspace) = (rows("ebpf")?, rows("userspace")?);
    let method = format!(
        "tunlab gen --pvp --ndr (profile {profile}): zero-loss binary search per frame size, the node on the eBPF datapath, then on the userspace one"
    );
    Ok(Done {
        checked: article::judge(
            spec,
            Measured::Pvp {
                ebpf: &ebpf,
                userspace: &userspace,
            },
        ),
        here: Here::of_machine(&method),
        spec: spec.clone(),
    })
}

fn write_pages(d: &Done, dir: &Path, command: &str) -> Result<(), String> {
    let run = tunlab_lab::results::Results::load(&dir.join("results.json")).ok();
    let json = serde_json::json!({
        "article": d.spec.article.name(),
        "title": d.spec.title,
        "command": command,
        "date": today(),
        "here": d.here,
        "checked": d.checked,
        "full_least": d.spec.full_least(),
    });
    let files = [
        (
            "findings.json",
            serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?,
        ),
        (
            "findings.md",
            page::markdown(&d.spec, &d.checked, &d.here, command),
        ),
        (
            "article.html",
            page::html(&d.spec, &d.checked, &d.here, run.as_ref()),
        ),
    ];
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(r) = &run {
        let charts = page::chart_files(&d.spec, r);
        if !charts.is_empty() {
            let at = dir.join("article-charts");
            let png_errors = tunlab_lab::html::write_charts(&at, &charts)
                .map_err(|e| format!("{}: {e}", at.display()))?;
            for e in png_errors {
                eprintln!("tunlab bench --article: no PNG for {e}");
            }
        }
    }
    Ok(())
}

/// Today's date (UTC, YYYY-MM-DD), as `date` gives it.
fn today() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

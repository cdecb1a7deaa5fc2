//! The articles' plans against their descriptions, and every kind of
//! check judged from synthetic runs.

use super::*;
use crate::results::{Environment, VariantResult};
use crate::stats::Summary;

/// A run of `plan` in which `figure(variant, test, round)` is every
/// sample's figure (throughput, transactions, CPU %, service demand
/// alike).
fn synthetic(plan: &Plan, rounds: usize, figure: impl Fn(Variant, &Test, usize) -> f64) -> Results {
    let sample = |x: f64, round: usize| Sample {
        gbit_s: Some(x),
        trans_s: Some(x),
        rtt_mean_us: None,
        rtt_p50_us: None,
        rtt_p99_us: None,
        udp_loss_pct: None,
        rx_pps: Some(x),
        tcp_retransmits: None,
        cpu: tunlab_netio::cpu::Usage {
            system_pct: x,
            system_busy_s: x,
            datapath_pct: 0.0,
            cpus: 2,
        },
        service_demand_us_per_kb: Some(x),
        seconds: 1.0,
        iface_rx_gbit_s: None,
        first_packet: None,
        hosts_cpu: Vec::new(),
        round: Some(round),
        seq: None,
        noise: None,
    };
    let variants = plan
        .variants
        .iter()
        .map(|v| VariantResult {
            variant: v.name().into(),
            status: "ok".into(),
            reason: None,
            tenant_mtu: v.tenant_mtu(),
            notes: Vec::new(),
            offloads: vec![("h1:under".into(), "tx-udp_tnl-segmentation,rx-gro".into())],
            tests: plan
                .tests
                .iter()
                .map(|t| {
                    let samples: Vec<Sample> =
                        (0..rounds).map(|r| sample(figure(*v, t, r), r)).collect();
                    TestResult {
                        test: t.name(),
                        spec: *t,
                        unit: t.unit().into(),
                        summary: Summary::of(&[1.0]),
                        samples,
                        attempts: rounds,
                        settled: true,
                        budget_spent: false,
                        error: None,
                        ratio: None,
                        demand_ratio: None,
                        retaken: Vec::new(),
                    }
                })
                .collect(),
        })
        .collect();
    Results {
        plan: plan.clone(),
        environment: Environment {
            kernel: "6.18.0".into(),
            cpu_model: "test CPU".into(),
            cpus: 2,
            underlay_mtu: 1500,
            tunlab: "0.1.0".into(),
            iperf3: "iperf 3.12".into(),
            sockperf: "sockperf 3.7".into(),
            ovs: "ovs-vswitchd 3.1.0".into(),
        },
        topology: String::new(),
        variants,
        interrupted: false,
        hosts: Vec::new(),
        stopped: None,
    }
}

/// Round `r`'s wobble: ±2 %, the same for every cell of the round.
fn wobble(r: usize) -> f64 {
    1.0 + 0.02 * [0.0, 1.0, -1.0, 0.5, -0.5, 0.8, -0.8][r % 7]
}

fn lab_plan(a: Article, profile: &str) -> Plan {
    match a.spec().experiment {
        Experiment::Lab(f) => f(profile),
        Experiment::Pvp => panic!("{} is a PVP article", a.name()),
    }
}

fn names(p: &Plan) -> Vec<String> {
    p.tests.iter().map(Test::name).collect()
}

#[test]
fn article_names_parse_alone_in_lists_and_as_all() {
    assert_eq!(Article::parse_list("all").unwrap(), Article::ALL.to_vec());
    assert_eq!(
        Article::parse_list("stt-gre,qinq").unwrap(),
        vec![Article::SttGre, Article::Qinq]
    );
    let e = Article::parse_list("stt-gre,gre").unwrap_err();
    assert!(
        e.contains("'gre' is not an article") && e.contains("trex-geneve-pvp, qinq, stt-gre, all"),
        "{e}"
    );
}

#[test]
fn each_plan_is_the_articles_matrix() {
    // geneve-vs-vxlan: pbench-uperf's 16 cells, 8 and 64 instances.
    let g = lab_plan(Article::GeneveVsVxlan, "full");
    assert_eq!(g.tests.len(), 16);
    assert!(g.tests.iter().all(|t| [8, 64].contains(&t.instances)));
    for kind in ["tcp_stream", "tcp_bidirec", "tcp_rr", "udp_rr"] {
        assert_eq!(
            names(&g).iter().filter(|n| n.starts_with(kind)).count(),
            4,
            "{kind}"
        );
    }
    assert!(g.variants.contains(&Variant::OvsGeneveOvn) && g.variants.contains(&Variant::OvsVxlan));
    // vxlan-offload: netperf, one stream, 4 KB to 64 KB, 10 s, offload on and off.
    let v = lab_plan(Article::VxlanOffload, "full");
    assert_eq!(
        v.tests.iter().map(|t| t.size).collect::<Vec<_>>(),
        [4096, 8192, 16384, 32768, 65536]
    );
    assert!(v
        .tests
        .iter()
        .all(|t| t.instances == 1 && t.kind == Kind::TcpStream));
    assert_eq!(v.seconds, 10);
    assert!(v.variants.contains(&Variant::KernelVxlanSw) && v.variants.contains(&Variant::None));
    // qinq: 1 and 5 instances, the iperf3 many-stream test and CPU at a fixed rate.
    let q = lab_plan(Article::Qinq, "full");
    assert!(names(&q).contains(&"tcp_stream-16384B-5i".to_string()));
    assert!(q.tests.iter().any(|t| t.rate_gbit.is_some()));
    assert!(
        q.variants.contains(&Variant::TunlabEbpfQinq) && q.variants.contains(&Variant::OvsQinq)
    );
    // stt-gre: 32 KB payloads, one flow and four VMs a side both ways.
    let s = lab_plan(Article::SttGre, "quick");
    assert_eq!(names(&s), ["tcp_stream-32768B-1i", "tcp_bidirec-32768B-4i"]);
    assert_eq!(s.baseline, Some(Variant::None));
    // The full version's least time, by its plan: 5 × 16 × 5 s × 5 rounds.
    assert!(
        Article::GeneveVsVxlan
            .spec()
            .full_least()
            .starts_with("at least 34 min of samples (5 variants × 16 tests"),
        "{}",
        Article::GeneveVsVxlan.spec().full_least()
    );
    // Every quick plan fits its budget; every test named in a plan parses.
    for a in Article::ALL {
        if let Experiment::Lab(f) = a.spec().experiment {
            let quick = f("quick");
            assert_eq!(
                quick.rule.budget_s,
                Some(catalog::QUICK_ARTICLE_BUDGET_S),
                "{}",
                a.name()
            );
            assert!(quick.baseline_index().is_some(), "{}", a.name());
            assert!(f("full").baseline_index().is_some(), "{}", a.name());
        }
    }
}

#[test]
fn every_test_a_plan_names_is_in_it() {
    // The plans drop nothing: each listed name parses (a typo would
    // silently shrink the matrix).
    for a in Article::ALL {
        let Experiment::Lab(f) = a.spec().experiment else {
            continue;
        };
        for profile in ["quick", "full"] {
            let p = f(profile);
            assert!(
                !p.tests.is_empty() && !p.variants.is_empty(),
                "{} {profile}",
                a.name()
            );
            for t in &p.tests {
                assert_eq!(Test::parse(&t.name()).unwrap(), *t);
            }
        }
    }
}

#[test]
fn every_finding_is_judged_by_the_quick_run() {
    // At least three findings per article, and each one has a check the
    // quick version measures (or says what hardware would test it).
    for a in Article::ALL {
        let spec = a.spec();
        assert!(spec.findings.len() >= 3, "{}", a.name());
        let checked = match spec.experiment {
            Experiment::Lab(f) => {
                let r = synthetic(&f("quick"), 5, |_, _, r| 10.0 * wobble(r));
                judge(&spec, Measured::Lab(&r))
            }
            Experiment::Pvp => {
                let rows = pvp_rows_of(&[(128, Some(1e6), true), (1500, Some(4e5), true)]);
                judge(
                    &spec,
                    Measured::Pvp {
                        ebpf: &rows,
                        userspace: &rows,
                    },
                )
            }
        };
        for f in &spec.findings {
            assert!(
                checked
                    .iter()
                    .any(|c| c.finding == f.id && c.outcome != Outcome::NotRun),
                "{} {}: {checked:#?}",
                a.name(),
                f.id
            );
        }
    }
}

#[test]
fn every_check_of_the_full_run_reads_cells_it_measures() {
    for a in Article::ALL {
        let spec = a.spec();
        let Experiment::Lab(f) = spec.experiment else {
            continue;
        };
        let r = synthetic(&f("full"), 5, |_, _, r| 10.0 * wobble(r));
        for c in judge(&spec, Measured::Lab(&r)) {
            assert_ne!(c.outcome, Outcome::NotRun, "{}: {c:#?}", a.name());
        }
    }
}

#[test]
fn an_interval_holds_only_when_it_clears_the_line() {
    let v = |outcome, clear| Verdict { outcome, clear };
    let (holds, not) = (Outcome::Holds, Outcome::DoesNotHold);
    assert_eq!(Claim::Above(1.8).judge(1.9, 2.1), v(holds, true));
    assert_eq!(Claim::Above(1.8).judge(1.0, 1.2), v(not, true));
    // Across the line: not shown, and open for more rounds.
    assert_eq!(Claim::Above(1.8).judge(1.7, 1.9), v(not, false));
    assert_eq!(Claim::Below(0.5).judge(0.3, 0.4), v(holds, true));
    assert_eq!(Claim::Below(0.5).judge(0.6, 0.9), v(not, true));
    assert_eq!(Claim::Below(1.0).judge(0.95, 1.05), v(not, false));
    // Against the article's size of effect: a 12.8 % gain is ruled out
    // by [0.97, 1.08], not by [0.97, 1.15].
    assert_eq!(Claim::Gain(1.128).judge(1.02, 1.2), v(holds, true));
    assert_eq!(Claim::Gain(1.128).judge(0.97, 1.08), v(not, true));
    assert_eq!(Claim::Gain(1.128).judge(0.97, 1.15), v(not, false));
    assert_eq!(Claim::Saving(0.88).judge(0.8, 0.95), v(holds, true));
    assert_eq!(Claim::Saving(0.88).judge(0.9, 1.1), v(not, true));
    assert_eq!(Claim::Saving(0.88).judge(0.85, 1.1), v(not, false));
}

#[test]
fn ratio_checks_pair_rounds_and_pool_tests() {
    let spec = Article::Qinq.spec();
    let plan = lab_plan(Article::Qinq, "quick");
    // QinQ twice the software tunnels' throughput, at a third of their
    // CPU per KB; the kernel's offload 1.5x its software path.
    let truth = |v: Variant, m_is_demand: bool| match (v, m_is_demand) {
        (Variant::TunlabEbpfQinq, false) => 20.0,
        (Variant::TunlabEbpfQinq, true) => 1.0 / 3.0,
        (Variant::KernelVxlan, _) => 15.0,
        _ => 10.0,
    };
    // Sample figures serve as throughput and demand at once, so judge
    // the throughput findings on one run and the demand one on another.
    let tput = synthetic(&plan, 6, |v, _, r| truth(v, false) * wobble(r + v as usize));
    let c = judge(&spec, Measured::Lab(&tput));
    let of = |id: &str| -> Vec<Outcome> {
        c.iter()
            .filter(|x| x.finding == id)
            .map(|x| x.outcome)
            .collect()
    };
    assert_eq!(of("qq1"), [Outcome::Holds, Outcome::Holds], "{c:#?}");
    assert_eq!(of("qq2"), [Outcome::Holds, Outcome::Holds]);
    assert_eq!(of("qq4"), [Outcome::Holds]);
    assert_eq!(of("qq5"), [Outcome::CannotTest]);
    let qq1 = c.iter().find(|x| x.finding == "qq1").unwrap();
    assert!(
        qq1.compared
            .contains("tunlab-ebpf-qinq / kernel-vxlan-sw, Gbit/s, tcp_stream-16384B-1i"),
        "{}",
        qq1.compared
    );
    assert!((qq1.ratio.as_ref().unwrap().ratio - 2.0).abs() < 0.1);
    let demand = synthetic(&plan, 6, |v, _, r| truth(v, true) * wobble(r + v as usize));
    let d = judge(&spec, Measured::Lab(&demand));
    let qq3: Vec<&Checked> = d.iter().filter(|x| x.finding == "qq3").collect();
    // Quick has no fixed-rate test: those two checks did not run, the
    // per-KB ones held (pooled over both stream tests).
    assert_eq!(
        qq3.iter().filter(|x| x.outcome == Outcome::NotRun).count(),
        2
    );
    assert_eq!(
        qq3.iter().filter(|x| x.outcome == Outcome::Holds).count(),
        2
    );
    assert!(qq3[2]
        .compared
        .ends_with("tcp_stream-16384B-1i + tcp_stream-16384B-5i"));
    // 1.1x is not "almost twice": does not hold, with the figure.
    let near = synthetic(&plan, 6, |v, _, r| {
        (if v == Variant::TunlabEbpfQinq {
            11.0
        } else {
            10.0
        }) * wobble(r + v as usize)
    });
    let n = judge(&spec, Measured::Lab(&near));
    let qq1 = n.iter().find(|x| x.finding == "qq1").unwrap();
    assert_eq!(qq1.outcome, Outcome::DoesNotHold);
    assert!(qq1.here.starts_with("1.1"), "{}", qq1.here);
}

#[test]
fn a_check_across_tests_pairs_each_round_with_the_other_tests_sample() {
    // vo3: CPU per KB at 4 KB writes over 64 KB writes, same variant.
    let spec = Article::VxlanOffload.spec();
    let plan = lab_plan(Article::VxlanOffload, "quick");
    let r = synthetic(&plan, 5, |_, t, r| {
        (if t.size == 4096 { 2.0 } else { 1.0 }) * wobble(r)
    });
    let c = judge(&spec, Measured::Lab(&r));
    let vo3 = c.iter().find(|x| x.finding == "vo3").unwrap();
    assert_eq!(vo3.outcome, Outcome::Holds, "{vo3:#?}");
    // The wobble is the same for both tests in a round: paired, it cancels.
    let x = vo3.ratio.as_ref().unwrap();
    assert!((x.ratio - 2.0).abs() < 1e-9 && x.hi - x.lo < 1e-9, "{x:?}");
    assert!(vo3
        .compared
        .contains("tcp_stream-4096B-1i / tcp_stream-65536B-1i"));
}

#[test]
fn a_variant_that_did_not_run_is_said_not_judged() -> Result<(), &'static str> {
    let spec = Article::SttGre.spec();
    let mut r = synthetic(&lab_plan(Article::SttGre, "quick"), 5, |_, _, r| wobble(r));
    r.variants.retain(|v| v.variant != "tunlab-stt");
    let c = judge(&spec, Measured::Lab(&r));
    let sg1 = c
        .iter()
        .find(|x| x.finding == "sg1")
        .ok_or("no sg1 check")?;
    assert_eq!(sg1.outcome, Outcome::NotRun);
    assert!(sg1.here.contains("did not run"));
    // A cell Ctrl-C ended keeps the samples it took; a failed one is out.
    let sg2_with_gre_error = |r: &mut Results, e: &str| {
        let gre = r.variants.iter_mut().find(|v| v.variant == "tunlab-gre");
        gre.ok_or("no tunlab-gre in the run")?.tests[0].error = Some(e.into());
        judge(&spec, Measured::Lab(r))
            .into_iter()
            .find(|x| x.finding == "sg2")
            .map(|c| c.outcome)
            .ok_or("no sg2 check")
    };
    assert_eq!(
        sg2_with_gre_error(&mut r, "interrupted")?,
        Outcome::DoesNotHold
    );
    assert_eq!(
        sg2_with_gre_error(&mut r, "iperf3: connection refused")?,
        Outcome::NotRun
    );
    // A variant the profile leaves out says so.
    let quick = judge(
        &Article::GeneveVsVxlan.spec(),
        Measured::Lab(&synthetic(
            &lab_plan(Article::GeneveVsVxlan, "quick"),
            5,
            |_, _, r| wobble(r),
        )),
    );
    let ovs = quick
        .iter()
        .find(|c| c.compared.starts_with("ovs-geneve-ovn"))
        .ok_or("no check of ovs-geneve-ovn")?;
    assert_eq!(ovs.outcome, Outcome::NotRun);
    assert!(
        ovs.here.contains("not in this profile's plan"),
        "{}",
        ovs.here
    );
    Ok(())
}

fn pvp_rows_of(rows: &[(u32, Option<f64>, bool)]) -> Vec<PvpRow> {
    rows.iter()
        .map(|(frame, rate, lim)| PvpRow {
            frame: *frame,
            rate_fps: *rate,
            generator_limited: *lim,
            top_fps: Some(1.2e6),
        })
        .collect()
}

#[test]
fn pvp_checks_read_the_searches() {
    let spec = Article::TrexGenevePvp.spec();
    let k = pvp_rows_of(&[
        (128, Some(1.2e6), true),
        (512, Some(1.1e6), true),
        (1500, Some(6e5), false),
    ]);
    let u = pvp_rows_of(&[
        (128, Some(3e5), false),
        (512, Some(2e5), false),
        (1500, Some(1e5), false),
    ]);
    let c = judge(
        &spec,
        Measured::Pvp {
            ebpf: &k,
            userspace: &u,
        },
    );
    let of = |id: &str| c.iter().find(|x| x.finding == id).unwrap().outcome;
    // 1500 B lost frames below the generator's top: not at "line rate".
    assert_eq!(of("tp1"), Outcome::DoesNotHold);
    // 1.2 Mfps at 128 B and 0.6 at 1500 B: 1.2 and 7.2 Gbit/s, a rate
    // limited by frames, not bits.
    assert_eq!(of("tp2"), Outcome::DoesNotHold);
    assert_eq!(of("tp3"), Outcome::Holds);
    assert_eq!(of("tp4"), Outcome::Holds);
    assert_eq!(of("tp5"), Outcome::CannotTest);
    // A link-limited node: 1.02 and 1.08 Gbit/s.
    let link = pvp_rows_of(&[(128, Some(1e6), true), (1500, Some(9e4), false)]);
    let c = judge(
        &spec,
        Measured::Pvp {
            ebpf: &link,
            userspace: &u,
        },
    );
    assert_eq!(
        c.iter().find(|x| x.finding == "tp2").unwrap().outcome,
        Outcome::Holds
    );
    // The same file format `tunlab gen --json` writes.
    let json = serde_json::json!({"rows": [
        {"frame_size": "128", "search": {"rate_pps": 5.0e5, "generator_limited": true,
          "steps": [{"phase": "max", "rate_pps": null, "outcome": {"tx": 10, "rx": 10, "tx_pps": 5.0e5}}]}},
        {"frame_size": "1500", "search": {"rate_pps": null, "generator_limited": false, "steps": []}}
    ]});
    let rows = pvp_rows(&json).unwrap();
    assert_eq!(
        rows[0],
        PvpRow {
            frame: 128,
            rate_fps: Some(5e5),
            generator_limited: true,
            top_fps: Some(5e5)
        }
    );
    assert_eq!(rows[1].rate_fps, None);
    assert!(pvp_rows(&serde_json::json!({"rows": [{"search": {}}]}))
        .unwrap_err()
        .contains("frame size"));
}

#[test]
fn the_page_puts_the_setups_side_by_side_and_escapes_text() {
    let spec = Article::SttGre.spec();
    let r = synthetic(&lab_plan(Article::SttGre, "quick"), 5, |v, _, r| {
        (if v == Variant::TunlabGre { 2.0 } else { 9.0 }) * wobble(r)
    });
    let c = judge(&spec, Measured::Lab(&r));
    let here = page::Here::of_run(&r);
    assert!(here.network.contains("tx-udp_tnl-segmentation"), "{here:?}");
    let html = page::html(&spec, &c, &here, Some(&r));
    assert!(html.contains("Broadcom") && html.contains("2 vCPUs, test CPU"));
    assert!(html.contains("<td class=\"holds\">holds here</td>"));
    assert!(html.contains("<svg"));
    let md = page::markdown(&spec, &c, &here, "tunlab bench --article stt-gre");
    assert!(
        md.contains("| sg2 |") && md.contains("**holds here**"),
        "{md}"
    );
    let text = page::text(&spec, &c);
    assert!(text.contains("sg5") && text.contains("stt-gre: "), "{text}");
    // STT at 9/9 is the no-tunnel rate (holds); its CPU per KB, equal to
    // no tunnel's, rules out the article's saving: its gap is said.
    assert!(
        text.contains("sg3: here, as sg1: userspace copies"),
        "{text}"
    );
    assert!(!text.contains("sg1: here,"), "{text}");
    assert!(html.contains("What bears on the verdicts"));
}

#[test]
fn the_rounds_go_to_the_cells_of_checks_not_yet_settled() {
    use Variant as V;
    let plan = lab_plan(Article::SttGre, "quick");
    // Every check clear of its line but sg5's (eBPF GRE against no
    // tunnel, > 0.9x), whose ratio swings ±5 % round to round about 0.9.
    let figure = |gre_ebpf: f64| {
        move |v: V, _: &Test, r: usize| {
            let x = match v {
                V::TunlabEbpfGre => gre_ebpf * [1.05, 0.95][r % 2],
                V::TunlabGre => 2.0,
                // Not exactly no tunnel's: a ratio of 1 with no spread
                // would sit on sg3's line.
                V::TunlabStt => 11.0,
                _ => 10.0,
            };
            x * wobble(r)
        }
    };
    let spec = Article::SttGre.spec();
    let r = synthetic(&plan, 5, figure(9.0));
    let open = open_cells(&spec, &r);
    let one = "tcp_stream-32768B-1i".to_string();
    assert_eq!(open, vec![(V::None, one.clone()), (V::TunlabEbpfGre, one)]);
    // Its verdict, were the rounds to end here: does not hold, not shown.
    let c = judge(&spec, Measured::Lab(&r));
    let sg5: Vec<_> = c.iter().filter(|x| x.finding == "sg5").collect();
    assert_eq!(sg5.len(), 1);
    assert_eq!(
        (sg5[0].outcome, sg5[0].clear),
        (Outcome::DoesNotHold, false)
    );
    assert!(sg5[0].here.contains("not shown"), "{}", sg5[0].here);
    assert!(c.iter().filter(|x| x.finding != "sg5").all(|x| x.clear));
    // Every check clear of its line: the rounds go on for the checks
    // wider than ±5 % (every check's cells here: all of the plan's but
    // eBPF GRE's four pairs, which no check reads), not stopping on the
    // round that cleared the last line.
    let noisy = |v: V, _: &Test, r: usize| {
        let x = match v {
            V::None => 10.0,
            V::TunlabGre => 1.0,
            _ => 20.0,
        };
        x * [1.15, 0.87, 1.05, 0.93, 1.0][(r + 2 * v as usize) % 5]
    };
    let r = synthetic(&plan, 5, noisy);
    let all = open_cells(&spec, &r);
    assert_eq!(
        all.len(),
        plan.variants.len() * plan.tests.len() - 1,
        "{all:?}"
    );
    assert!(!all.contains(&(V::TunlabEbpfGre, "tcp_bidirec-32768B-4i".into())));
    // Clear and within ±5 %: the rounds end.
    let quiet = |v: V, t: &Test, r: usize| noisy(v, t, 0) * wobble(r);
    let r = synthetic(&plan, 5, quiet);
    assert_eq!(open_cells(&spec, &r), Vec::new());
    // sg5 clear of its line (it holds) and within ±5 %, but by less than
    // its half-width: not settled, so the rounds go on for it alone.
    let near = |v: V, t: &Test, r: usize| match v {
        V::TunlabEbpfGre => quiet(V::None, t, r) * 0.915 * [1.01, 0.99][r % 2],
        _ => quiet(v, t, r),
    };
    let r = synthetic(&plan, 5, near);
    let c = judge(&spec, Measured::Lab(&r));
    let sg5 = c.iter().find(|x| x.finding == "sg5").expect("sg5 checked");
    assert_eq!(
        (sg5.outcome, sg5.clear),
        (Outcome::Holds, true),
        "{}",
        sg5.here
    );
    assert!(
        !sg5.settled && sg5.here.contains("near the line"),
        "{}",
        sg5.here
    );
    assert!(c.iter().filter(|x| x.finding != "sg5").all(|x| x.settled));
    let one = "tcp_stream-32768B-1i".to_string();
    assert_eq!(
        open_cells(&spec, &r),
        vec![(V::None, one.clone()), (V::TunlabEbpfGre, one)]
    );
}

#[test]
fn a_check_is_open_while_its_interval_reaches_the_line_its_verdict_turns_on() {
    use crate::stats::Ratio;
    let at = |lo: f64, ratio: f64, hi: f64| Ratio {
        rounds: 5,
        ratio,
        lo,
        hi,
        median: ratio,
    };
    // A gain the article put at 1.13x: [0.98, 1.05] rules its figure out
    // (clear), yet reaches 1.00, across which "holds" turns.
    let gain = Claim::Gain(1.128);
    let r = at(0.98, 1.01, 1.05);
    assert!(gain.judge(r.lo, r.hi).clear && gain.reached(&r) && !gain.settled(&r));
    // Clear of 1.00 by more than its half-width: settled.
    let r = at(1.05, 1.08, 1.11);
    assert!(!gain.reached(&r) && gain.settled(&r));
    // Clear by less than its half-width: not settled.
    let r = at(1.01, 1.04, 1.07);
    assert!(!gain.reached(&r) && !gain.settled(&r));
    // The line of Above and Below is the article's figure.
    assert_eq!(
        (Claim::Above(0.95).line(), Claim::Below(0.35).line()),
        (0.95, 0.35)
    );
    assert!(Claim::Below(0.35).settled(&at(0.13, 0.15, 0.16)));
}

#[test]
fn the_articles_charts_group_by_test_with_a_bar_per_variant() {
    let plan = lab_plan(Article::SttGre, "quick");
    let r = synthetic(&plan, 5, |v, _, r| (1.0 + v as usize as f64) * wobble(r));
    let charts = page::charts(&Article::SttGre.spec(), &r);
    assert_eq!(charts.len(), 3);
    let gbit = &charts[0];
    assert_eq!(gbit.unit, "Gbit/s");
    assert_eq!(
        gbit.series,
        ["none", "tunlab-stt", "tunlab-gre", "tunlab-ebpf-gre"]
    );
    let labels: Vec<&str> = gbit.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["tcp_stream-32768B-1i", "tcp_bidirec-32768B-4i"]);
    for row in &gbit.rows {
        assert_eq!(row.bars.len(), 4);
        assert!(row
            .bars
            .iter()
            .all(|b| b.as_ref().is_some_and(|b| b.samples.len() == 5)));
    }
    assert_eq!(charts[2].unit, "CPU µs/KB");
    let files: Vec<String> = page::chart_files(&Article::SttGre.spec(), &r)
        .into_iter()
        .map(|n| n.file)
        .collect();
    assert_eq!(
        files,
        [
            "1-throughput-one-flow-and-four-pairs-both-ways",
            "2-cpu",
            "3-cpu-per-kb-moved"
        ]
    );
    // QinQ's quick run has no fixed-rate test: that chart is left out.
    let plan = lab_plan(Article::Qinq, "quick");
    let r = synthetic(&plan, 3, |_, _, r| wobble(r));
    let spec = Article::Qinq.spec();
    assert_eq!(page::charts(&spec, &r).len(), spec.charts.len() - 1);
    let html = page::html(
        &spec,
        &judge(&spec, Measured::Lab(&r)),
        &page::Here::of_run(&r),
        Some(&r),
    );
    assert!(
        html.contains("netperf throughput, 1 and 5 instances"),
        "{html}"
    );
}

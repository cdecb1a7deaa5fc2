//! Bar charts as SVG: one row per variant, a bar per series at the mean,
//! an error bar of ± one standard deviation, and every sample as a dot, so
//! that a reader sees the spread and not only the average. The same SVG
//! goes inline into the HTML report and, rasterised, into PNG files.

use crate::stats::Summary;
use resvg::{tiny_skia, usvg};
use std::fmt::Write;
use std::sync::{Arc, OnceLock};

/// One bar: the samples behind it (their summary is drawn).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub samples: Vec<f64>,
}

impl Bar {
    fn summary(&self) -> Summary {
        Summary::of(&self.samples)
    }
}

/// One row: a label and one bar per series, or a note (FAILED, skipped)
/// in place of the bars.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub bars: Vec<Option<Bar>>,
    pub note: Option<String>,
    /// Said in red after the figures (e.g. unsettled).
    pub flag: Option<String>,
    /// The bar colour when the chart has one series (by variant family).
    pub color: &'static str,
}

/// A chart: title, the unit of its axis, the series' names (one series:
/// no legend) and its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub unit: String,
    pub series: Vec<String>,
    pub rows: Vec<Row>,
}

const WIDTH: f64 = 760.0;
const VALUE_W: f64 = 170.0;

/// The width of the label column for `labels`: the longest at 12 px
/// DejaVu Sans (7.3 px a character at most for these names), never less
/// than 150.
fn label_width<'a>(labels: impl Iterator<Item = &'a str>) -> f64 {
    let chars = labels.map(|l| l.chars().count()).max().unwrap_or(0);
    f64::max(150.0, 16.0 + 7.3 * chars as f64)
}
const BAR_H: f64 = 14.0;
const ROW_GAP: f64 = 8.0;
const TOP: f64 = 44.0;
const SERIES_COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#9c755f",
];
/// The height of each legend line past the first.
const LEGEND_LINE_H: f64 = 16.0;

/// The colour of a variant's family: no tunnel grey, kernel blue, tunlab
/// green, Open vSwitch purple.
pub fn family_color(variant: &str) -> &'static str {
    if variant.starts_with("tunlab") {
        "#59a14f"
    } else if variant.starts_with("kernel") {
        "#4e79a7"
    } else if variant.starts_with("ovs") {
        "#b07aa1"
    } else {
        "#9c9c9c"
    }
}

/// XML text and attribute escaping.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

/// A round axis end and tick step covering `max` with about five ticks
/// (steps of 1, 2 or 5 times a power of ten).
pub fn nice_axis(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.2);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// A figure in a few significant digits (1.02, 13.9, 13940, 412k).
pub fn short(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e5 {
        format!("{:.0}k", x / 1e3)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A tick label with as many decimals as the step needs (0, 2, 4 or 0.2,
/// 0.4), large values shortened (150k).
fn tick_label(v: f64, step: f64) -> String {
    if v.abs() >= 1e5 {
        return short(v);
    }
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

impl Chart {
    fn row_h(&self) -> f64 {
        self.series.len().max(1) as f64 * BAR_H + ROW_GAP
    }

    /// The top of the plot: under the title and the legend's lines.
    fn top(&self) -> f64 {
        let lines = if self.series.len() > 1 {
            legend_layout(self.series.iter().map(String::as_str))
                .last()
                .map_or(1, |p| p.1 + 1)
        } else {
            1
        };
        TOP + LEGEND_LINE_H * (lines - 1) as f64
    }

    /// The chart's height in pixels.
    pub fn height(&self) -> f64 {
        self.top() + self.rows.len() as f64 * self.row_h() + 50.0
    }

    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> String {
        let h = self.height();
        let mut s = String::new();
        let _ = write!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">"##
        );
        let _ = write!(
            s,
            r##"<rect width="{WIDTH}" height="{h}" fill="#ffffff"/><text x="10" y="18" font-size="14" font-weight="bold">{}</text>"##,
            esc(&self.title)
        );
        self.legend(&mut s);
        let max = self
            .rows
            .iter()
            .flat_map(|r| r.bars.iter().flatten())
            .map(|b| {
                let m = b.summary();
                (m.mean + m.stddev).max(m.max)
            })
            .fold(0.0, f64::max);
        let (end, step) = nice_axis(max);
        let label_w = label_width(self.rows.iter().map(|r| r.label.as_str()));
        let plot_w = WIDTH - label_w - VALUE_W - 20.0;
        let x = |v: f64| label_w + plot_w * (v / end).clamp(0.0, 1.0);
        let top = self.top();
        let plot_bottom = top + self.rows.len() as f64 * self.row_h();
        grid(&mut s, &x, (0.0, end, step), (top, plot_bottom));
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#333">{}</text>"##,
            label_w + plot_w / 2.0,
            plot_bottom + 30.0,
            esc(&self.unit)
        );
        let _ = write!(
            s,
            r##"<text x="10" y="{}" font-size="11" fill="#666">bar: mean; whiskers: ±1 standard deviation; dots: the samples; figures: mean ± standard deviation in % of the mean</text>"##,
            plot_bottom + 46.0
        );
        for (i, row) in self.rows.iter().enumerate() {
            let y0 = top + i as f64 * self.row_h() + ROW_GAP / 2.0;
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                label_w - 8.0,
                y0 + self.row_h() / 2.0,
                esc(&row.label)
            );
            if let Some(note) = &row.note {
                let _ = write!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}" fill="#c0392b">{}</text>"##,
                    label_w + 4.0,
                    y0 + self.row_h() / 2.0,
                    esc(note)
                );
                continue;
            }
            for (k, bar) in row.bars.iter().enumerate() {
                let y = y0 + k as f64 * BAR_H;
                let color = if self.series.len() > 1 {
                    SERIES_COLORS[k % SERIES_COLORS.len()]
                } else {
                    row.color
                };
                let Some(bar) = bar else {
                    let _ = write!(
                        s,
                        r##"<text x="{:.1}" y="{:.1}" fill="#888">—</text>"##,
                        label_w + 4.0,
                        y + BAR_H - 3.0
                    );
                    continue;
                };
                let m = bar.summary();
                let _ = write!(
                    s,
                    r##"<rect x="{label_w:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"##,
                    x(m.mean) - label_w,
                    BAR_H - 2.0
                );
                whiskers_and_dots(&mut s, &m, &bar.samples, y + (BAR_H - 2.0) / 2.0, &x);
                let spread = if m.n > 1 {
                    format!(" ±{:.1}%", m.cv_pct)
                } else {
                    String::new()
                };
                let flag = match (&row.flag, k) {
                    (Some(f), 0) => format!(r##" <tspan fill="#c0392b">{}</tspan>"##, esc(f)),
                    _ => String::new(),
                };
                let _ = write!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}">{}{spread}{flag}</text>"##,
                    label_w + plot_w + 10.0,
                    y + BAR_H - 3.0,
                    short(m.mean)
                );
            }
        }
        s.push_str("</svg>");
        s
    }

    fn legend(&self, s: &mut String) {
        if self.series.len() > 1 {
            legend(s, self.series.iter().map(String::as_str));
        }
    }
}

/// Vertical grid lines from `top` to `bottom` at every `step` of the
/// axis `(from, to, step)`, each labelled under the plot.
fn grid(
    s: &mut String,
    x: &dyn Fn(f64) -> f64,
    (from, to, step): (f64, f64, f64),
    (top, bottom): (f64, f64),
) {
    let mut t = from;
    while t <= to + step / 2.0 {
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{bottom}" stroke="#e3e3e3"/><text x="{0:.1}" y="{1}" text-anchor="middle" fill="#555">{2}</text>"##,
            x(t),
            bottom + 14.0,
            tick_label(t, step)
        );
        t += step;
    }
}

/// Where each legend entry goes: (x, line), a new line where the next
/// name would pass the chart's right edge.
fn legend_layout<'a>(names: impl Iterator<Item = &'a str>) -> Vec<(f64, usize)> {
    let (mut lx, mut line) = (10.0, 0);
    names
        .map(|name| {
            let w = 30.0 + 7.5 * name.chars().count() as f64;
            if lx > 10.0 && lx + w > WIDTH - 10.0 {
                (lx, line) = (10.0, line + 1);
            }
            let at = (lx, line);
            lx += w;
            at
        })
        .collect()
}

/// A colour square and a name per series, in rows under the title.
fn legend<'a>(s: &mut String, names: impl Iterator<Item = &'a str> + Clone) {
    for (k, (name, (lx, line))) in names.clone().zip(legend_layout(names)).enumerate() {
        let y = 26.0 + LEGEND_LINE_H * line as f64;
        let _ = write!(
            s,
            r##"<rect x="{lx}" y="{y}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"##,
            SERIES_COLORS[k % SERIES_COLORS.len()],
            lx + 14.0,
            y + 9.0,
            esc(name)
        );
    }
}

/// A time series chart: one line per series over a shared x axis
/// (seconds), for curves a reader checks for drift (memory, descriptors,
/// counters over a soak).
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    /// The y axis' unit.
    pub unit: String,
    pub x_unit: String,
    /// (name, points); a series of no points is left out.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

const LINE_PLOT_H: f64 = 220.0;
const LINE_LEFT: f64 = 70.0;
/// The plot's top: below the legend and the unit above the y axis.
const LINE_TOP: f64 = TOP + 18.0;

impl LineChart {
    pub fn height(&self) -> f64 {
        LINE_TOP + LINE_PLOT_H + 50.0
    }

    /// The chart as a standalone SVG document; the y axis starts at zero,
    /// so that a flat line looks flat and a growing one grows.
    pub fn svg(&self) -> String {
        let h = self.height();
        let mut s = String::new();
        let _ = write!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12"><rect width="{WIDTH}" height="{h}" fill="#ffffff"/><text x="10" y="18" font-size="14" font-weight="bold">{}</text>"##,
            esc(&self.title)
        );
        legend(&mut s, self.series.iter().map(|(name, _)| name.as_str()));
        let points = || self.series.iter().flat_map(|(_, p)| p.iter());
        let (x_end, x_step) = nice_axis(points().map(|p| p.0).fold(0.0, f64::max));
        let (y_end, y_step) = nice_axis(points().map(|p| p.1).fold(0.0, f64::max));
        let plot_w = WIDTH - LINE_LEFT - 20.0;
        let bottom = LINE_TOP + LINE_PLOT_H;
        let x = |v: f64| LINE_LEFT + plot_w * (v / x_end).clamp(0.0, 1.0);
        let y = |v: f64| bottom - LINE_PLOT_H * (v / y_end).clamp(0.0, 1.0);
        let mut t = 0.0;
        while t <= y_end + y_step / 2.0 {
            let _ = write!(
                s,
                r##"<line x1="{LINE_LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#e3e3e3"/><text x="{2:.1}" y="{3:.1}" text-anchor="end" fill="#555">{4}</text>"##,
                y(t),
                LINE_LEFT + plot_w,
                LINE_LEFT - 6.0,
                y(t) + 4.0,
                tick_label(t, y_step)
            );
            t += y_step;
        }
        let mut t = 0.0;
        while t <= x_end + x_step / 2.0 {
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}</text>"##,
                x(t),
                bottom + 14.0,
                tick_label(t, x_step)
            );
            t += x_step;
        }
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text><text x="10" y="{:.1}" fill="#333">{}</text>"##,
            LINE_LEFT + plot_w / 2.0,
            bottom + 30.0,
            esc(&self.x_unit),
            LINE_TOP - 8.0,
            esc(&self.unit)
        );
        for (k, (_, pts)) in self.series.iter().enumerate() {
            if pts.is_empty() {
                continue;
            }
            let mut d = String::new();
            for (i, (px, py)) in pts.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if i == 0 { "M" } else { "L" },
                    x(*px),
                    y(*py)
                );
            }
            let _ = write!(
                s,
                r##"<path d="{d}" stroke="{}" stroke-width="1.5" fill="none"/>"##,
                SERIES_COLORS[k % SERIES_COLORS.len()]
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// A chart of either kind, as the report files hold them.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    Bars(Chart),
    Forest(Forest),
}

impl Figure {
    pub fn svg(&self) -> String {
        match self {
            Figure::Bars(c) => c.svg(),
            Figure::Forest(f) => f.svg(),
        }
    }
}

/// One row of a forest plot: a variant's ratio against the baseline and
/// its interval, or a note in their place.
#[derive(Debug, Clone, PartialEq)]
pub struct ForestRow {
    pub label: String,
    /// (ratio, low, high).
    pub ratio: Option<(f64, f64, f64)>,
    /// Said after the interval: the figures and the verdict.
    pub text: String,
    /// Drawn in red (unsettled, FAILED).
    pub bad: bool,
    pub color: &'static str,
}

/// A forest plot: each variant's ratio against the baseline as a dot,
/// its 95 % interval as a line, the line of no difference at 1 and the
/// band of ±`band_pct` around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Forest {
    pub title: String,
    /// What the ratio is of, under the axis.
    pub axis: String,
    pub band_pct: f64,
    pub rows: Vec<ForestRow>,
}

const FOREST_ROW_H: f64 = 20.0;
const FOREST_TEXT_W: f64 = 250.0;

impl Forest {
    pub fn height(&self) -> f64 {
        TOP + self.rows.len().max(1) as f64 * FOREST_ROW_H + 52.0
    }

    /// The axis' ends and tick step: covers every interval and the band.
    fn range(&self) -> (f64, f64, f64) {
        let band = self.band_pct / 100.0;
        let (mut lo, mut hi) = (1.0 - band, 1.0 + band);
        for (_, l, h) in self.rows.iter().filter_map(|r| r.ratio) {
            lo = lo.min(l);
            hi = hi.max(h);
        }
        let (_, step) = nice_axis(hi - lo);
        let lo = ((lo / step).floor() * step).max(0.0);
        let hi = (hi / step).ceil() * step;
        (lo, hi, step)
    }

    pub fn svg(&self) -> String {
        let h = self.height();
        let label_w = label_width(self.rows.iter().map(|r| r.label.as_str()));
        let plot_w = WIDTH - label_w - FOREST_TEXT_W - 10.0;
        let (lo, hi, step) = self.range();
        let x = |v: f64| label_w + plot_w * ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
        let bottom = TOP + self.rows.len().max(1) as f64 * FOREST_ROW_H;
        let mut s = String::new();
        let _ = write!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12"><rect width="{WIDTH}" height="{h}" fill="#ffffff"/><text x="10" y="18" font-size="14" font-weight="bold">{}</text>"##,
            esc(&self.title)
        );
        let band = self.band_pct / 100.0;
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{:.1}" fill="#eef3ea"/>"##,
            x(1.0 - band),
            x(1.0 + band) - x(1.0 - band),
            bottom - TOP
        );
        grid(&mut s, &x, (lo, hi, step), (TOP, bottom));
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{bottom}" stroke="#555" stroke-dasharray="4 3"/><text x="{1:.1}" y="{2}" text-anchor="middle" fill="#333">{3}</text><text x="10" y="{4}" font-size="11" fill="#666">dot: ratio (geometric mean over rounds); line: its 95 % interval; shaded: ±{5}% of no difference</text>"##,
            x(1.0),
            label_w + plot_w / 2.0,
            bottom + 30.0,
            esc(&self.axis),
            bottom + 46.0,
            self.band_pct
        );
        for (i, row) in self.rows.iter().enumerate() {
            let yc = TOP + i as f64 * FOREST_ROW_H + FOREST_ROW_H / 2.0;
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                label_w - 8.0,
                yc + 4.0,
                esc(&row.label)
            );
            if let Some((r, l, h)) = row.ratio {
                let _ = write!(
                    s,
                    r##"<path d="M{0:.1} {1:.1}H{2:.1}M{0:.1} {3:.1}V{4:.1}M{2:.1} {3:.1}V{4:.1}" stroke="#222" stroke-width="1.4" fill="none"/><circle cx="{5:.1}" cy="{1:.1}" r="4.5" fill="{6}" stroke="#222"/>"##,
                    x(l),
                    yc,
                    x(h),
                    yc - 4.0,
                    yc + 4.0,
                    x(r),
                    row.color
                );
            }
            let fill = if row.bad { "#c0392b" } else { "#222" };
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" fill="{fill}">{}</text>"##,
                label_w + plot_w + 10.0,
                yc + 4.0,
                esc(&row.text)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// The system's fonts, loaded once (the chart text is DejaVu Sans).
fn fonts() -> &'static Arc<usvg::fontdb::Database> {
    static DB: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = usvg::fontdb::Database::new();
        db.load_system_fonts();
        Arc::new(db)
    })
}

/// Rasterise an SVG (as [`Chart::svg`] makes it) to PNG at twice its
/// size, so that it stays sharp when pasted into a document.
pub fn png(svg: &str) -> Result<Vec<u8>, String> {
    let fontdb = fonts();
    if fontdb.is_empty() {
        return Err("no fonts found for the chart text: apt-get install fonts-dejavu-core".into());
    }
    let opt = usvg::Options {
        fontdb: Arc::clone(fontdb),
        ..Default::default()
    };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("bad SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width() * 2, size.height() * 2)
        .ok_or_else(|| "the chart has no area".to_string())?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(2.0, 2.0),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| e.to_string())
}

/// A bar's whiskers (±1 standard deviation, with more than one sample)
/// and its samples as dots, on the line at `yc`.
fn whiskers_and_dots(
    s: &mut String,
    m: &Summary,
    samples: &[f64],
    yc: f64,
    x: &dyn Fn(f64) -> f64,
) {
    if m.n > 1 {
        let (lo, hi) = (x(m.mean - m.stddev), x(m.mean + m.stddev));
        let _ = write!(
            s,
            r##"<path d="M{lo:.1} {yc:.1}H{hi:.1}M{lo:.1} {:.1}V{:.1}M{hi:.1} {:.1}V{:.1}" stroke="#222" stroke-width="1.2" fill="none"/>"##,
            yc - 4.0,
            yc + 4.0,
            yc - 4.0,
            yc + 4.0
        );
    }
    for v in samples {
        let _ = write!(
            s,
            r##"<circle cx="{:.1}" cy="{yc:.1}" r="2" fill="#fff" stroke="#222" stroke-width="0.8"/>"##,
            x(*v)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_legend_wraps_and_the_plot_moves_down_under_it() {
        let names = [
            "kernel-vxlan",
            "kernel-vxlan-sw",
            "tunlab-ebpf-geneve",
            "tunlab-ebpf-qinq",
            "ovs-qinq",
            "ovs-vxlan",
            "ovs-geneve",
        ];
        let at = legend_layout(names.iter().copied());
        assert!(at.last().is_some_and(|p| p.1 >= 1), "{at:?}");
        for (name, (x, _)) in names.iter().zip(&at) {
            assert!(x + 30.0 + 7.5 * name.len() as f64 <= WIDTH, "{name} at {x}");
        }
        let chart = |series: &[&str]| Chart {
            title: "t".into(),
            unit: "Gbit/s".into(),
            series: series.iter().map(|s| s.to_string()).collect(),
            rows: vec![],
        };
        assert!(chart(&names).top() > chart(&names[..2]).top());
        assert_eq!(chart(&names[..2]).top(), TOP);
    }

    #[test]
    fn a_line_chart_draws_each_series_and_renders() {
        let c = LineChart {
            title: "RSS <h1>".into(),
            unit: "MiB".into(),
            x_unit: "seconds".into(),
            series: vec![
                ("h1".into(), vec![(0.0, 10.0), (1.0, 10.5), (2.0, 10.2)]),
                ("h2".into(), vec![(0.0, 3.0), (2.0, 3.0)]),
                ("none".into(), vec![]),
            ],
        };
        let svg = c.svg();
        assert_eq!(svg.matches("<path").count(), 2);
        assert!(svg.contains("RSS &lt;h1&gt;"));
        assert!(png(&svg).is_ok());
    }

    #[test]
    fn axis_ends_are_round_and_cover_the_maximum() {
        let near = |(a, b): (f64, f64), (c, d): (f64, f64)| {
            (a - c).abs() < 1e-9 * c && (b - d).abs() < 1e-9 * d
        };
        assert!(near(nice_axis(6.17), (8.0, 2.0)));
        assert!(near(nice_axis(13940.0), (15000.0, 5000.0)));
        assert!(near(nice_axis(0.54), (0.6, 0.2)));
        assert!(near(nice_axis(100.0), (100.0, 20.0)));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(f64::NAN), (1.0, 0.2));
        for m in [0.003, 1.0, 7.3, 99.0, 101.0, 4.5e5] {
            let (end, step) = nice_axis(m);
            assert!(end >= m && end / step <= 10.0 && end / step >= 2.0, "{m}");
        }
    }

    fn chart() -> Chart {
        Chart {
            title: "tcp_stream-16384B-1i <throughput>".into(),
            unit: "Gbit/s".into(),
            series: vec!["only".into()],
            rows: vec![
                Row {
                    label: "none".into(),
                    bars: vec![Some(Bar {
                        samples: vec![6.0, 6.2, 6.4],
                    })],
                    note: None,
                    flag: Some("unsettled".into()),
                    color: family_color("none"),
                },
                Row {
                    label: "ovs-geneve".into(),
                    bars: vec![None],
                    note: Some("FAILED".into()),
                    flag: None,
                    color: family_color("ovs-geneve"),
                },
            ],
        }
    }

    #[test]
    fn the_svg_draws_bars_error_bars_samples_and_notes() {
        let svg = chart().svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        // Title escaped, one bar, three sample dots, one error bar.
        assert!(svg.contains("&lt;throughput&gt;"));
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches("<path").count(), 1);
        assert!(
            svg.contains(">6.20 ±3.2% <tspan fill=\"#c0392b\">unsettled<"),
            "{svg}"
        );
        assert!(svg.contains(">FAILED<"));
        // The axis ends at 8 (covers mean + sd = 6.4, ticks of 2): the bar
        // is 6.2/8 of the plot wide.
        assert!(svg.contains(">8<") && svg.contains(">2<"), "{svg}");
        let w = (WIDTH - 150.0 - VALUE_W - 20.0) * 6.2 / 8.0;
        assert!(svg.contains(&format!("width=\"{w:.1}\"")), "{svg}");
    }

    #[test]
    fn the_png_is_the_svg_rendered_with_text() {
        let png = png(&chart().svg()).expect("rendered");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let img = tiny_skia::Pixmap::decode_png(&png).expect("decodes");
        assert_eq!(img.width(), 2 * WIDTH as u32);
        // The text was drawn: the title row holds dark pixels, and the
        // "none" bar's colour fills its row.
        let dark = |x: u32, y: u32| img.pixel(x, y).is_some_and(|p| p.red() < 80);
        assert!(
            (0..400).any(|x| (20..40).any(|y| dark(x, y))),
            "no title text"
        );
        let bar_y = 2 * (TOP + ROW_GAP / 2.0 + 5.0) as u32;
        let p = img.pixel(2 * 150 + 20, bar_y).expect("in the image");
        assert_eq!((p.red(), p.green(), p.blue()), (0x9c, 0x9c, 0x9c));
    }

    #[test]
    fn long_variant_names_fit_their_column() {
        // The longest variant name (22 characters) is drawn right-aligned
        // at the column's edge: the column must hold it.
        let w = label_width(["tunlab-ebpf-geneve-ovn", "none"].into_iter());
        assert!(w - 8.0 >= 22.0 * 7.3, "{w}");
        assert_eq!(label_width(["none"].into_iter()), 150.0);
        let mut c = chart();
        c.rows[0].label = "tunlab-ebpf-geneve-ovn".into();
        let svg = c.svg();
        let x: f64 = svg
            .split("text-anchor=\"end\">tunlab-ebpf-geneve-ovn")
            .next()
            .and_then(|b| b.rsplit("<text x=\"").next())
            .and_then(|t| t.split('"').next())
            .and_then(|t| t.parse().ok())
            .unwrap();
        assert!(x >= 22.0 * 7.3, "the label ends at {x}");
    }

    #[test]
    fn a_forest_plot_draws_each_interval_around_one() {
        let f = Forest {
            title: "tcp_rr-64B-1i: ratio to kernel-vxlan".into(),
            axis: "trans/s, ratio to kernel-vxlan".into(),
            band_pct: 5.0,
            rows: vec![
                ForestRow {
                    label: "tunlab-ebpf-geneve-ovn".into(),
                    ratio: Some((1.10, 1.05, 1.16)),
                    text: "1.10 [1.05, 1.16] faster".into(),
                    bad: false,
                    color: family_color("tunlab"),
                },
                ForestRow {
                    label: "ovs-geneve-ovn".into(),
                    ratio: None,
                    text: "FAILED".into(),
                    bad: true,
                    color: family_color("ovs"),
                },
            ],
        };
        let (lo, hi, step) = f.range();
        assert!(lo <= 0.95 && hi >= 1.16 && step > 0.0, "{lo} {hi} {step}");
        let svg = f.svg();
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(svg.contains(">1.10 [1.05, 1.16] faster<"));
        assert!(svg.contains("fill=\"#c0392b\">FAILED<"));
        assert!(svg.contains("stroke-dasharray"));
        assert!(png(&svg).is_ok());
    }
}

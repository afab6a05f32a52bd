//! The comparison's plot, as a self-contained SVG written by hand (no fonts, no crates:
//! the viewer lays the text out): one legend; for each scenario run at more than one
//! latency, messages/s against the latency added per call, per system (log scale); then per
//! scenario and latency, messages/s over time of each system (first repetition) on an axis
//! fitted to the systems compared, the raw ceiling drawn as its mean (a dashed reference
//! line, or a note when it is off that scale), and the latency percentiles of each system
//! (log scale). Every axis has ticks, a grid and its unit, and every line is clipped to its
//! frame.

use std::fmt::Write as _;

use super::comparison::Comparison;
use super::summary::Row;
use super::system::System;
use crate::server::Latency;

/// Width of the whole plot.
const WIDTH: f64 = 1120.0;
/// Width of one panel, frame and labels.
const PANEL_W: f64 = 560.0;
/// Height of one panel, frame and labels.
const PANEL_H: f64 = 250.0;
/// Left margin of a panel's frame (tick labels and the axis title).
const LEFT: f64 = 62.0;
/// Right margin of a panel's frame.
const RIGHT: f64 = 28.0;
/// Top margin of a panel's frame (its title).
const TOP: f64 = 26.0;
/// Bottom margin of a panel's frame (tick labels and the axis title).
const BOTTOM: f64 = 40.0;
/// The shortest window a throughput point covers, in seconds.
const WINDOW: f64 = 0.1;
/// The ceiling is drawn on the systems' scale when its mean is at most this many times
/// their highest point; above, it is a note.
const CEILING_ON_SCALE: f64 = 2.5;

/// The colour of a system.
fn colour(system: System) -> &'static str {
    match system {
        System::SqsEngine => "#d62728",
        System::SqsEngineBroker => "#ff7f0e",
        System::RuststreamSqsSns => "#1f77b4",
        System::Naive => "#7f7f7f",
        System::Ceiling => "#2ca02c",
    }
}

/// Messages per second over windows of at least [`WINDOW`] seconds of the timeline
/// `[seconds, finished]`, as points at each window's end. A last window shorter than half
/// of one is folded into the one before, so the end of a run makes no spike.
fn rates(timeline: &[[f64; 2]]) -> Vec<(f64, f64)> {
    let mut ends: Vec<[f64; 2]> = Vec::new();
    let Some(first) = timeline.first() else {
        return Vec::new();
    };
    let mut last = *first;
    for sample in timeline.iter().skip(1) {
        if sample[0] - last[0] >= WINDOW {
            ends.push(*sample);
            last = *sample;
        }
    }
    if let Some(tail) = timeline.last().filter(|tail| tail[0] > last[0]) {
        if tail[0] - last[0] >= WINDOW / 2.0 || ends.is_empty() {
            ends.push(*tail);
        } else if let Some(previous) = ends.last_mut() {
            *previous = *tail;
        }
    }
    let mut points = Vec::new();
    let mut from = *first;
    for end in ends {
        let dt = end[0] - from[0];
        if dt > 0.0 {
            points.push((end[0], (end[1] - from[1]) / dt));
        }
        from = end;
    }
    points
}

/// Escapes text for SVG.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A step of 1, 2 or 5 times a power of ten that cuts `0..=max` into about `ticks` parts.
fn nice_step(max: f64, ticks: f64) -> f64 {
    let raw = (max / ticks).max(f64::MIN_POSITIVE);
    let power = 10_f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// The axis `0..=top` with its tick step: `top` is `max` rounded up to a whole step.
fn linear_axis(max: f64, ticks: f64) -> (f64, f64) {
    let step = nice_step(max.max(1e-9), ticks);
    let top = (max / step).ceil().max(1.0) * step;
    (top, step)
}

/// A number for a tick label: `0`, `0.5`, `750`, `1.5k`, `40k`.
fn tick_label(value: f64) -> String {
    let abs = value.abs();
    if abs >= 1000.0 {
        let k = value / 1000.0;
        if (k - k.round()).abs() < 1e-9 {
            format!("{k:.0}k")
        } else {
            format!("{k:.1}k")
        }
    } else if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0}")
    } else if abs >= 0.1 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// A rate as text: `41,200`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The frame of a panel whose top left corner is at `(x, y)`: left, top, width, height.
fn frame(x: f64, y: f64) -> (f64, f64, f64, f64) {
    (
        x + LEFT,
        y + TOP,
        PANEL_W - LEFT - RIGHT,
        PANEL_H - TOP - BOTTOM,
    )
}

/// Draws a panel's title, frame and clip path (named `id`).
fn panel(out: &mut String, id: &str, title: &str, (fx, fy, fw, fh): (f64, f64, f64, f64)) {
    let _ = writeln!(
        out,
        r#"<text x="{fx}" y="{}" font-weight="bold">{}</text>"#,
        fy - 9.0,
        esc(title)
    );
    let _ = writeln!(
        out,
        r#"<clipPath id="{id}"><rect x="{fx}" y="{fy}" width="{fw}" height="{fh}"/></clipPath>"#
    );
    let _ = writeln!(
        out,
        r##"<rect x="{fx}" y="{fy}" width="{fw}" height="{fh}" fill="none" stroke="#888"/>"##
    );
}

/// A horizontal grid line and its tick label at height `y` of the frame.
fn y_tick(out: &mut String, (fx, _, fw, _): (f64, f64, f64, f64), y: f64, label: &str) {
    let _ = writeln!(
        out,
        r##"<line x1="{fx}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><line x1="{:.1}" y1="{y:.1}" x2="{fx}" y2="{y:.1}" stroke="#888"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"##,
        fx + fw,
        fx - 4.0,
        fx - 6.0,
        y + 4.0
    );
}

/// A vertical grid line and its tick label at `x` of the frame.
fn x_tick(out: &mut String, (_, fy, _, fh): (f64, f64, f64, f64), x: f64, label: &str) {
    let _ = writeln!(
        out,
        r##"<line x1="{x:.1}" y1="{fy}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#888"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
        fy + fh,
        fy + fh,
        fy + fh + 4.0,
        fy + fh + 16.0
    );
}

/// The axis titles of a frame.
fn axis_titles(out: &mut String, (fx, fy, fw, fh): (f64, f64, f64, f64), x: &str, y: &str) {
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
        fx + fw / 2.0,
        fy + fh + 32.0,
        esc(x)
    );
    let (yx, yy) = (fx - 48.0, fy + fh / 2.0);
    let _ = writeln!(
        out,
        r##"<text x="{yx:.1}" y="{yy:.1}" text-anchor="middle" fill="#444" transform="rotate(-90 {yx:.1} {yy:.1})">{}</text>"##,
        esc(y)
    );
}

/// Decades `10^lo..=10^hi` covering `min..=max` (both above zero).
fn decades(min: f64, max: f64) -> (i32, i32) {
    let lo = min.max(1e-6).log10().floor() as i32;
    let hi = (max.max(1e-6).log10().ceil() as i32).max(lo + 1);
    (lo, hi)
}

/// The label of `10^exponent`: `0.01`, `1`, `10k`.
fn decade_label(exponent: i32) -> String {
    tick_label(10_f64.powi(exponent))
}

/// The plot of `comparison`.
pub(crate) fn svg(comparison: &Comparison) -> String {
    let scenarios = &comparison.scenarios;
    let systems: Vec<System> = System::ALL
        .into_iter()
        .filter(|system| comparison.runs.iter().any(|r| r.result.system == *system))
        .collect();
    // Scenarios run at more than one latency get a panel of messages/s against latency.
    let mut swept = Vec::new();
    for scenario in scenarios {
        let latencies = scenarios.iter().filter(|s| s.kind == scenario.kind).count();
        if latencies > 1 && !scenario.light && !swept.contains(&scenario.kind) {
            swept.push(scenario.kind);
        }
    }
    let sweep_rows = swept.len().div_ceil(2);
    let header = 64.0;
    let height = header + PANEL_H * (sweep_rows + scenarios.len()) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="12" y="20" font-size="14" font-weight="bold">sqs-engine load-test comparison on {} ({} repetition(s); over time: the first; figures: means of all)</text>"#,
        esc(&comparison.target),
        comparison.repetitions
    );
    // The one legend: a line per system, and the three latency bars.
    let mut x = 12.0;
    for system in &systems {
        let dash = if *system == System::Ceiling {
            r#" stroke-dasharray="6 3""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="38" x2="{}" y2="38" stroke="{}" stroke-width="3"{dash}/><text x="{}" y="42">{}</text>"#,
            x + 22.0,
            colour(*system),
            x + 27.0,
            system.name()
        );
        x += 40.0 + 6.5 * system.name().len() as f64;
    }
    x += 16.0;
    for (name, opacity) in LATENCY_BARS {
        let _ = writeln!(
            out,
            r##"<rect x="{x}" y="33" width="16" height="10" fill="#555" fill-opacity="{opacity}"/><text x="{}" y="42">{name}</text>"##,
            x + 20.0
        );
        x += 30.0 + 6.0 * name.len() as f64;
    }
    let _ = writeln!(
        out,
        r##"<text x="12" y="58" fill="#444">{}</text>"##,
        esc(&latency_note(comparison))
    );
    for (index, kind) in swept.iter().enumerate() {
        let x = PANEL_W * (index % 2) as f64;
        let y = header + PANEL_H * (index / 2) as f64;
        sweep_panel(&mut out, comparison, *kind, &systems, (x, y));
    }
    for (index, scenario) in scenarios.iter().enumerate() {
        let y = header + PANEL_H * (sweep_rows + index) as f64;
        over_time_panel(&mut out, comparison, scenario, index, y);
        latency_panel(&mut out, comparison, scenario, index, y);
    }
    out.push_str("</svg>\n");
    out
}

/// The three latency bars of each system, with their opacity.
const LATENCY_BARS: [(&str, &str); 3] = [
    ("settle p50", "0.4"),
    ("settle p99", "0.85"),
    ("send>handler p99", "0.2"),
];

/// What the latencies of the plot are, as one line.
fn latency_note(comparison: &Comparison) -> String {
    let mut seen: Vec<Latency> = Vec::new();
    for scenario in &comparison.scenarios {
        if !scenario.latency.is_none() && !seen.contains(&scenario.latency) {
            seen.push(scenario.latency);
        }
    }
    if seen.is_empty() {
        return "every call at loopback latency (the embedded server answers at once)".to_owned();
    }
    let parts: Vec<String> = seen
        .iter()
        .map(|latency| {
            format!(
                "@{}: {} added to every call (mean {:.1} ms)",
                latency.short(),
                latency.label(),
                latency.mean_ms()
            )
        })
        .collect();
    format!(
        "{}; the rest at loopback; seed {}",
        parts.join("; "),
        comparison.latency_seed
    )
}

/// The rows of `scenario`'s kind at its latency.
fn rows_of<'a>(comparison: &'a Comparison, scenario: &super::Scenario) -> Vec<&'a Row> {
    comparison
        .summary
        .rows
        .iter()
        .filter(|r| r.scenario == scenario.kind && r.latency == scenario.latency)
        .collect()
}

/// Messages/s against the latency added per call (mean), per system, log scale.
fn sweep_panel(
    out: &mut String,
    comparison: &Comparison,
    kind: super::ScenarioKind,
    systems: &[System],
    (x, y): (f64, f64),
) {
    let rows: Vec<&Row> = comparison
        .summary
        .rows
        .iter()
        .filter(|r| r.scenario == kind && r.messages_per_sec > 0.0)
        .collect();
    let f = frame(x, y);
    let (fx, fy, fw, fh) = f;
    panel(
        out,
        &format!("sweep-{}", kind.name()),
        &format!(
            "{}: messages/s against the latency added per call",
            kind.name()
        ),
        f,
    );
    let max_ms = rows.iter().map(|r| r.latency.mean_ms()).fold(0.0, f64::max);
    // Room right of the last points for their values.
    let (x_top, x_step) = linear_axis(max_ms.max(1.0) * 1.25, 5.0);
    let min_rate = rows
        .iter()
        .map(|r| r.messages_per_sec)
        .fold(f64::MAX, f64::min);
    let max_rate = rows.iter().map(|r| r.messages_per_sec).fold(1.0, f64::max);
    let (lo, hi) = decades(min_rate.min(max_rate), max_rate);
    let px = |ms: f64| fx + ms / x_top * fw;
    let py = |rate: f64| {
        let at = (rate.max(1e-6).log10() - f64::from(lo)) / f64::from(hi - lo);
        fy + fh - at.clamp(0.0, 1.0) * fh
    };
    for exponent in lo..=hi {
        y_tick(out, f, py(10_f64.powi(exponent)), &decade_label(exponent));
        if exponent < hi {
            for minor in [2.0, 5.0] {
                let yy = py(minor * 10_f64.powi(exponent));
                let _ = writeln!(
                    out,
                    r##"<line x1="{fx}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#f2f2f2"/>"##,
                    fx + fw
                );
            }
        }
    }
    let mut tick = 0.0;
    while tick <= x_top + 1e-9 {
        x_tick(out, f, px(tick), &tick_label(tick));
        tick += x_step;
    }
    axis_titles(
        out,
        f,
        "latency added per call, mean (ms; 0: loopback)",
        "messages/s (log scale)",
    );
    // The value of each system at the highest latency, right of its point, moved apart so
    // that no two overlap.
    let mut labels: Vec<(f64, f64, System, f64)> = Vec::new();
    for system in systems {
        let mut points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.system == *system)
            .map(|r| (r.latency.mean_ms(), r.messages_per_sec))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if points.is_empty() {
            continue;
        }
        let dash = if *system == System::Ceiling {
            r#" stroke-dasharray="6 3""#
        } else {
            ""
        };
        let path: Vec<String> = points
            .iter()
            .map(|(ms, rate)| format!("{:.1},{:.1}", px(*ms), py(*rate)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="2"{dash} points="{}" clip-path="url(#sweep-{})"/>"#,
            colour(*system),
            path.join(" "),
            kind.name()
        );
        for (ms, rate) in &points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"><title>{}: {} msg/s at {ms:.1} ms</title></circle>"#,
                px(*ms),
                py(*rate),
                colour(*system),
                system.name(),
                thousands(*rate)
            );
        }
        if let Some((ms, rate)) = points.last().filter(|(ms, _)| *ms > 0.0) {
            labels.push((px(*ms) + 7.0, py(*rate) + 4.0, *system, *rate));
        }
    }
    labels.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut last_y = f64::MIN;
    for (lx, ly, system, rate) in labels {
        let ly = ly.max(last_y + 11.0);
        last_y = ly;
        let _ = writeln!(
            out,
            r#"<text x="{lx:.1}" y="{ly:.1}" font-size="10" fill="{}">{}</text>"#,
            colour(system),
            thousands(rate)
        );
    }
}

/// Messages/s over time of each system in `scenario` (first repetition), on an axis fitted
/// to the systems; the raw ceiling as its mean.
fn over_time_panel(
    out: &mut String,
    comparison: &Comparison,
    scenario: &super::Scenario,
    index: usize,
    y: f64,
) {
    let f = frame(0.0, y);
    let (fx, fy, fw, fh) = f;
    let id = format!("time-{index}");
    panel(
        out,
        &id,
        &format!("{}: messages/s over time", scenario.label()),
        f,
    );
    let series: Vec<(System, Vec<(f64, f64)>)> = comparison
        .runs
        .iter()
        .filter(|r| {
            r.scenario == scenario.kind && r.latency == scenario.latency && r.repetition == 0
        })
        .map(|r| (r.result.system, rates(&r.result.timeline)))
        .collect();
    let ceiling = rows_of(comparison, scenario)
        .into_iter()
        .find(|r| r.system == System::Ceiling)
        .map(|r| (r.messages_per_sec, r.ceiling_loops));
    let others_max = series
        .iter()
        .filter(|(system, _)| *system != System::Ceiling)
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let ceiling_on_scale =
        ceiling.is_some_and(|(rate, _)| others_max <= 0.0 || rate <= CEILING_ON_SCALE * others_max);
    let scale_max = match ceiling {
        Some((rate, _)) if ceiling_on_scale => others_max.max(rate),
        _ => others_max,
    }
    .max(1.0);
    let (y_top, y_step) = linear_axis(scale_max * 1.05, 5.0);
    let t_max = series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.0))
        .fold(0.1, f64::max);
    let (x_top, x_step) = linear_axis(t_max, 8.0);
    let px = |t: f64| fx + t / x_top * fw;
    let py = |rate: f64| fy + fh - (rate / y_top).clamp(0.0, 1.0) * fh;
    if scenario.light {
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" fill="#444">one message at a time: its rate is the harness's cycle, not a throughput</text>"##,
            fx + 12.0,
            fy + fh / 2.0
        );
        return;
    }
    let mut tick = 0.0;
    while tick <= y_top + 1e-9 {
        y_tick(out, f, py(tick), &tick_label(tick));
        tick += y_step;
    }
    let mut tick = 0.0;
    while tick <= x_top + 1e-9 {
        x_tick(out, f, px(tick), &tick_label(tick));
        tick += x_step;
    }
    axis_titles(out, f, "time since the system started (s)", "messages/s");
    for (system, points) in &series {
        if *system == System::Ceiling || points.is_empty() {
            continue;
        }
        let path: Vec<String> = points
            .iter()
            .map(|(t, r)| format!("{:.1},{:.1}", px(*t), py(*r)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.6" points="{}" clip-path="url(#{id})"/>"#,
            colour(*system),
            path.join(" ")
        );
        // A run shorter than two windows has one point: a dot, so that it still shows.
        if let [(t, rate)] = points.as_slice() {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                px(*t),
                py(*rate),
                colour(*system)
            );
        }
    }
    if let Some((rate, loops)) = ceiling {
        let loops = loops.map_or_else(String::new, |n| format!(" x{n}"));
        if ceiling_on_scale {
            let yy = py(rate);
            let _ = writeln!(
                out,
                r#"<line x1="{fx}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="{}" stroke-width="2" stroke-dasharray="6 3"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="{}">ceiling{loops}: {} msg/s (mean)</text>"#,
                fx + fw,
                colour(System::Ceiling),
                fx + fw - 4.0,
                (yy - 4.0).max(fy + 11.0),
                colour(System::Ceiling),
                thousands(rate)
            );
        } else {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="{}">&#8593; ceiling{loops}: {} msg/s (mean), {:.0}x this scale's top</text>"#,
                fx + fw - 4.0,
                fy + 12.0,
                colour(System::Ceiling),
                thousands(rate),
                rate / y_top
            );
        }
    }
}

/// Settlement p50 and p99 and send-to-handler p99 of each system in `scenario`, as
/// horizontal bars on a log scale of milliseconds.
fn latency_panel(
    out: &mut String,
    comparison: &Comparison,
    scenario: &super::Scenario,
    index: usize,
    y: f64,
) {
    // More room on the left for the systems' names.
    let (fx, fy, fw, fh) = frame(PANEL_W, y);
    let f = (fx + 60.0, fy, fw - 60.0, fh);
    let (fx, fy, fw, fh) = f;
    panel(
        out,
        &format!("lat-{index}"),
        &format!(
            "{}: settlement p50 / p99, send-to-handler p99",
            scenario.label()
        ),
        f,
    );
    let rows = rows_of(comparison, scenario);
    let values: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            [
                r.settlement.map(|p| p.p50_ms),
                r.settlement.map(|p| p.p99_ms),
                r.e2e.map(|p| p.p99_ms),
            ]
        })
        .flatten()
        .filter(|ms| *ms > 0.0)
        .collect();
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = if values.is_empty() {
        (-1, 3)
    } else {
        decades(min, max * 1.6)
    };
    let px = |ms: f64| {
        let at = (ms.max(1e-6).log10() - f64::from(lo)) / f64::from(hi - lo);
        fx + at.clamp(0.0, 1.0) * fw
    };
    for exponent in lo..=hi {
        x_tick(out, f, px(10_f64.powi(exponent)), &decade_label(exponent));
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">milliseconds (log scale)</text>"##,
        fx + fw / 2.0,
        fy + fh + 32.0
    );
    let slot = fh / rows.len().max(1) as f64;
    for (at, row) in rows.iter().enumerate() {
        let top = fy + slot * at as f64;
        let name = match row.ceiling_loops {
            Some(loops) => format!("{} x{loops}", row.system.name()),
            None => row.system.name().to_owned(),
        };
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            fx - 6.0,
            top + slot / 2.0 + 4.0,
            colour(row.system),
            esc(&name)
        );
        let bar_h = ((slot - 6.0) / 3.0).max(2.0);
        let values = [
            row.settlement.map(|p| p.p50_ms),
            row.settlement.map(|p| p.p99_ms),
            row.e2e.map(|p| p.p99_ms),
        ];
        for (k, (value, (_, opacity))) in values.iter().zip(LATENCY_BARS).enumerate() {
            let by = top + 3.0 + bar_h * k as f64;
            match value {
                Some(ms) if *ms > 0.0 => {
                    let end = px(*ms);
                    let _ = writeln!(
                        out,
                        r#"<rect x="{fx}" y="{by:.1}" width="{:.1}" height="{:.1}" fill="{}" fill-opacity="{opacity}"><title>{ms:.3} ms</title></rect><text x="{:.1}" y="{:.1}" font-size="9">{}</text>"#,
                        (end - fx).max(1.0),
                        (bar_h - 1.0).max(1.0),
                        colour(row.system),
                        end + 3.0,
                        by + bar_h - 2.0,
                        if *ms >= 10.0 {
                            format!("{ms:.0}")
                        } else {
                            format!("{ms:.2}")
                        }
                    );
                }
                _ => {
                    let _ = writeln!(
                        out,
                        r#"<text x="{:.1}" y="{:.1}" font-size="9">n/a</text>"#,
                        fx + 3.0,
                        by + bar_h - 2.0
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_a_round_tick_above_the_data() {
        assert_eq!(linear_axis(41_234.0, 5.0), (50_000.0, 10_000.0));
        assert_eq!(linear_axis(1_234.0, 5.0), (1_500.0, 500.0));
        assert_eq!(linear_axis(3.7, 6.0), (4.0, 1.0));
        assert_eq!(tick_label(1_500.0), "1.5k");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(thousands(41_234.4), "41,234");
        assert_eq!(decades(0.35, 48.0), (-1, 2));
    }

    #[test]
    fn rates_are_messages_per_second_over_windows() {
        let timeline = [
            [0.0, 0.0],
            [0.125, 10.0],
            [0.25, 30.0],
            [0.375, 40.0],
            [0.40625, 45.0],
        ];
        let points = rates(&timeline);
        assert_eq!(points.len(), 3, "{points:?}");
        assert!((points[0].1 - 80.0).abs() < 1e-9, "{points:?}");
        assert!((points[1].1 - 160.0).abs() < 1e-9, "{points:?}");
        // The short tail is folded into the last window: 15 messages in 0.15625 s.
        assert!((points[2].0 - 0.40625).abs() < 1e-9, "{points:?}");
        assert!((points[2].1 - 96.0).abs() < 1e-9, "{points:?}");
    }
}

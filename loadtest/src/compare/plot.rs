//! The comparison's plot, as a self-contained SVG: per scenario, throughput over time of
//! each system (first repetition), and its latency percentiles.

use std::fmt::Write as _;

use super::Comparison;
use super::systems::System;

/// Width of one panel.
const PANEL_W: f64 = 520.0;
/// Height of one panel.
const PANEL_H: f64 = 220.0;
/// Margin around a panel's plot area.
const MARGIN: f64 = 50.0;
/// The shortest window a throughput point covers, in seconds.
const WINDOW: f64 = 0.1;

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

/// The plot of `comparison`.
pub(crate) fn svg(comparison: &Comparison) -> String {
    let scenarios = &comparison.scenarios;
    let width = 2.0 * PANEL_W;
    let height = 40.0 + PANEL_H * scenarios.len() as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="10" y="20" font-size="14">sqs-engine load-test comparison on {} (throughput: first repetition; latency: mean of repetitions)</text>"#,
        esc(&comparison.target)
    );
    let mut legend_x = 10.0;
    for system in System::ALL {
        let _ = writeln!(
            out,
            r#"<rect x="{legend_x}" y="28" width="10" height="6" fill="{}"/><text x="{}" y="35">{}</text>"#,
            colour(system),
            legend_x + 14.0,
            system.name()
        );
        legend_x += 140.0;
    }
    for (index, scenario) in scenarios.iter().enumerate() {
        let top = 40.0 + PANEL_H * index as f64;
        // Throughput panel.
        let runs: Vec<_> = comparison
            .runs
            .iter()
            .filter(|r| r.scenario == scenario.kind && r.repetition == 0)
            .collect();
        let series: Vec<(System, Vec<(f64, f64)>)> = runs
            .iter()
            .map(|r| (r.result.system, rates(&r.result.timeline)))
            .collect();
        let max_t = series
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.0))
            .fold(0.1, f64::max);
        let max_r = series
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.1))
            .fold(1.0, f64::max);
        let (x0, y0) = (MARGIN, top + 20.0);
        let (w, h) = (PANEL_W - 1.5 * MARGIN, PANEL_H - MARGIN - 10.0);
        let _ = writeln!(
            out,
            r#"<text x="{x0}" y="{}" font-weight="bold">{}: messages/s over time (s)</text>"#,
            y0 - 6.0,
            scenario.kind.name()
        );
        let _ = writeln!(
            out,
            r##"<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>"##
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{max_r:.0}</text>"#,
            x0 - 3.0,
            y0 + 10.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">0</text>"#,
            x0 - 3.0,
            y0 + h
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{max_t:.1} s</text>"#,
            x0 + w,
            y0 + h + 12.0
        );
        if scenario.light {
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}">one message at a time: the rate is the harness's cycle, not a throughput</text>"#,
                x0 + 10.0,
                y0 + h / 2.0
            );
        }
        for (system, points) in series.iter().filter(|_| !scenario.light) {
            let path: Vec<String> = points
                .iter()
                .map(|(t, r)| format!("{:.1},{:.1}", x0 + t / max_t * w, y0 + h - r / max_r * h))
                .collect();
            if !path.is_empty() {
                let _ = writeln!(
                    out,
                    r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
                    colour(*system),
                    path.join(" ")
                );
            }
        }
        // Latency panel: settlement p50, p99 and send-to-handler-start p99, per system.
        let x0 = PANEL_W + MARGIN;
        let _ = writeln!(
            out,
            r#"<text x="{x0}" y="{}" font-weight="bold">{}: settlement p50 / p99, send-to-handler p99 (ms, log scale)</text>"#,
            y0 - 6.0,
            scenario.kind.name()
        );
        let _ = writeln!(
            out,
            r##"<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>"##
        );
        let rows: Vec<_> = comparison
            .summary
            .rows
            .iter()
            .filter(|r| r.scenario == scenario.kind)
            .collect();
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
            .collect();
        let top_ms = values.iter().copied().fold(1.0, f64::max);
        // Room above the tallest bar for its label.
        let log_top = (top_ms * 1000.0).log10().max(1.0) * 1.1;
        let bar_h = |ms: f64| ((ms * 1000.0).max(1.0).log10() / log_top * h).max(1.0);
        let group_w = w / rows.len().max(1) as f64;
        for (at, row) in rows.iter().enumerate() {
            let gx = x0 + group_w * at as f64 + 4.0;
            let bw = (group_w - 8.0) / 3.0;
            let bars = [
                (row.settlement.map(|p| p.p50_ms), "0.45"),
                (row.settlement.map(|p| p.p99_ms), "0.8"),
                (row.e2e.map(|p| p.p99_ms), "0.25"),
            ];
            for (k, (value, opacity)) in bars.iter().enumerate() {
                let bx = gx + bw * k as f64;
                match value {
                    Some(ms) => {
                        let bh = bar_h(*ms);
                        let _ = writeln!(
                            out,
                            r#"<rect x="{bx:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}" fill-opacity="{opacity}"><title>{ms:.3} ms</title></rect><text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">{}</text>"#,
                            y0 + h - bh,
                            bw - 1.0,
                            colour(row.system),
                            bx + bw / 2.0,
                            y0 + h - bh - 2.0,
                            if *ms >= 10.0 {
                                format!("{ms:.0}")
                            } else {
                                format!("{ms:.2}")
                            }
                        );
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            r#"<text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">n/a</text>"#,
                            bx + bw / 2.0,
                            y0 + h - 2.0
                        );
                    }
                }
            }
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                gx + (group_w - 8.0) / 2.0,
                y0 + h + 12.0,
                row.system.name()
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

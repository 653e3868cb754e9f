//! The self-contained HTML report: one file, inline CSS and SVG, no scripts, no external assets.

use std::fmt::Write as _;

use crate::evaluation::{Metric, StoredMetric};

use super::{PHI_BINS, RunReport, TIERS, share};

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
];

const TIER_COLORS: [&str; 4] = ["#1a9850", "#91cf60", "#fdae61", "#d73027"];

/// Escape text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn color(i: usize) -> &'static str {
    PALETTE.get(i % PALETTE.len()).copied().unwrap_or("#888")
}

/// Φ distribution: one histogram per variant (small multiples, shared y scale).
fn phi_histograms(report: &RunReport) -> String {
    let (w, h, pad) = (320.0, 140.0, 24.0);
    let max = report
        .variants
        .values()
        .flat_map(|v| v.phi_histogram.iter().map(|&c| share(c, v.phi_scored)))
        .fold(0.0_f64, f64::max)
        .max(0.01);
    let mut out = String::from("<div class=\"multiples\">");
    for (i, (name, v)) in report.variants.iter().enumerate() {
        let _ = write!(
            out,
            "<figure><svg width=\"{w}\" height=\"{}\" viewBox=\"0 0 {w} {}\" role=\"img\" aria-label=\"Φ histogram {}\">",
            h + pad,
            h + pad,
            escape(name)
        );
        let bar_w = (w - 2.0 * pad) / PHI_BINS as f64;
        for (bin, &count) in v.phi_histogram.iter().enumerate() {
            let frac = share(count, v.phi_scored) / max;
            let bh = frac * (h - pad);
            let x = pad + bin as f64 * bar_w;
            let _ = write!(
                out,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>Φ {}–{}: {count}</title></rect>",
                h - bh,
                bar_w - 2.0,
                color(i),
                bin * 10,
                bin * 10 + 10
            );
        }
        let _ = write!(
            out,
            "<line x1=\"{pad}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"#333\"/>",
            w - pad
        );
        for tick in [0, 50, 100] {
            let x = pad + f64::from(tick) / 100.0 * (w - 2.0 * pad);
            let _ = write!(
                out,
                "<text x=\"{x:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{tick}</text>",
                h + 14.0
            );
        }
        let _ = write!(
            out,
            "</svg><figcaption>{} — n = {}, mean Φ = {:.1}</figcaption></figure>",
            escape(name),
            v.events,
            v.phi_mean
        );
    }
    out.push_str("</div>");
    out
}

/// Tier shares: one stacked horizontal bar per variant.
fn tier_bars(report: &RunReport) -> String {
    let (w, row_h, label_w) = (720.0, 28.0, 200.0);
    let h = row_h * report.variants.len() as f64 + 30.0;
    let mut out = format!(
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"tier shares\">"
    );
    for (row, (name, v)) in report.variants.iter().enumerate() {
        let y = row as f64 * row_h;
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
            label_w - 6.0,
            y + 17.0,
            escape(name)
        );
        let mut x = label_w;
        for (t, tier) in TIERS.iter().enumerate() {
            let s = share(v.tiers.get(*tier).copied().unwrap_or(0), v.events);
            let bw = s * (w - label_w - 10.0);
            let _ = write!(
                out,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{}\" fill=\"{}\"><title>{tier}: {:.1}%</title></rect>",
                y + 4.0,
                row_h - 8.0,
                TIER_COLORS.get(t).copied().unwrap_or("#888"),
                s * 100.0
            );
            if bw > 34.0 {
                let _ = write!(
                    out,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#fff\" text-anchor=\"middle\">{:.0}%</text>",
                    x + bw / 2.0,
                    y + 18.0,
                    s * 100.0
                );
            }
            x += bw;
        }
    }
    let legend_y = h - 8.0;
    for (t, tier) in TIERS.iter().enumerate() {
        let x = label_w + t as f64 * 110.0;
        let _ = write!(
            out,
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{legend_y:.1}\" font-size=\"12\">{tier}</text>",
            legend_y - 10.0,
            TIER_COLORS.get(t).copied().unwrap_or("#888"),
            x + 16.0
        );
    }
    out.push_str("</svg>");
    out
}

/// Per-metric comparison: grouped bars (metric × variant), all on a 0–1 scale (Φ / 100).
fn metric_bars(report: &RunReport) -> String {
    let mut metrics: Vec<&StoredMetric> = report
        .variants
        .values()
        .flat_map(|v| v.metrics.keys())
        .collect();
    metrics.sort();
    metrics.dedup();
    let variants = report.variants.len().max(1);
    let group_w = (variants as f64 * 22.0 + 20.0).max(60.0);
    let (h, pad) = (220.0, 30.0);
    let w = pad * 2.0 + group_w * metrics.len().max(1) as f64;
    let mut out = format!(
        "<svg width=\"{w:.0}\" height=\"{}\" viewBox=\"0 0 {w:.0} {}\" role=\"img\" aria-label=\"metric comparison\">",
        h + 40.0,
        h + 40.0
    );
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let y = h - tick * (h - 10.0);
        let _ = write!(
            out,
            "<line x1=\"{pad}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{tick}</text>",
            w - pad,
            pad - 4.0,
            y + 3.0
        );
    }
    for (m, metric) in metrics.iter().enumerate() {
        let gx = pad + m as f64 * group_w + 10.0;
        for (i, v) in report.variants.values().enumerate() {
            if let Some((mean, n)) = v.metrics.get(*metric) {
                let bh = mean.clamp(0.0, 1.0) * (h - 10.0);
                let _ = write!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"18\" height=\"{bh:.1}\" fill=\"{}\"><title>{metric}: {mean:.3} (n = {n})</title></rect>",
                    gx + i as f64 * 22.0,
                    h - bh,
                    color(i)
                );
            }
        }
        let label = if **metric == Metric::Stef {
            "stef (Φ/100)"
        } else {
            metric.as_str()
        };
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            gx + variants as f64 * 11.0,
            h + 16.0,
            escape(label)
        );
    }
    out.push_str("</svg><p class=\"legend\">");
    for (i, name) in report.variants.keys().enumerate() {
        let _ = write!(
            out,
            "<span><i style=\"background:{}\"></i>{}</span>",
            color(i),
            escape(name)
        );
    }
    out.push_str("</p>");
    out
}

fn disagreements(report: &RunReport) -> String {
    if report.disagreements.is_empty() {
        return "<p>No event where EX and FLEX/ROSE disagree (or the run has no FLEX/ROSE rows).</p>"
            .into();
    }
    let mut out = String::from(
        "<table><thead><tr><th>event</th><th>variant</th><th>EX</th><th>judge / ts_ex</th><th>predicted SQL</th><th>gold SQL</th><th>counterexample</th></tr></thead><tbody>",
    );
    for d in &report.disagreements {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} {}</td><td><pre>{}</pre></td><td><pre>{}</pre></td><td><pre>{}</pre></td></tr>",
            escape(&d.event_id),
            escape(&d.variant),
            if d.ex { "✔" } else { "✘" },
            escape(d.other_metric.as_str()),
            if d.other { "✔" } else { "✘" },
            escape(d.sql.as_deref().unwrap_or("(not available)")),
            escape(d.gold_sql.as_deref().unwrap_or("(not available)")),
            escape(d.counterexample.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table>");
    out
}

fn summary_table(report: &RunReport) -> String {
    let mut out = String::from("<table><thead><tr><th>variant</th><th>events</th><th>mean Φ</th>");
    for tier in TIERS {
        let _ = write!(out, "<th>{tier}</th>");
    }
    out.push_str("<th>statuses</th></tr></thead><tbody>");
    for (name, v) in &report.variants {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td>",
            escape(name),
            v.events,
            v.phi_mean
        );
        for tier in TIERS {
            let _ = write!(
                out,
                "<td>{:.1}%</td>",
                share(v.tiers.get(tier).copied().unwrap_or(0), v.events) * 100.0
            );
        }
        let statuses = v
            .statuses
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(out, "<td>{}</td></tr>", escape(&statuses));
    }
    out.push_str("</tbody></table>");
    out
}

/// Mean of every metric per variant over scored rows, with its 95% interval and coverage.
fn interval_table(report: &RunReport) -> String {
    let mut metrics: Vec<&StoredMetric> = report
        .variants
        .values()
        .flat_map(|v| v.rows.keys())
        .collect();
    metrics.sort();
    metrics.dedup();
    let mut out = String::from(
        "<p>Means over scored rows (rows that are not scored — the gold query cannot be parsed \
         or run, the judge gave no verdict — are not averaged in as 0), with a 95% interval \
         (Wilson for verdict metrics) and the coverage (scored / rows).</p><table><thead><tr>\
         <th>variant</th><th>metric</th><th>mean [95% interval]  coverage</th></tr></thead><tbody>",
    );
    for (name, v) in &report.variants {
        for m in &metrics {
            if let Some(line) = v.metric_line(m.as_str()) {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(name),
                    escape(m.as_str()),
                    escape(&line)
                );
            }
        }
    }
    out.push_str("</tbody></table>");
    out
}

/// Paired comparisons of every two variants on the items both scored.
fn comparison_table(report: &RunReport) -> String {
    if report.comparisons.is_empty() {
        return "<p>No two variants scored the same items (same <code>event_id</code>), so no \
                paired comparison.</p>"
            .to_string();
    }
    let mut out = String::from(
        "<p>McNemar's exact test for verdict metrics, the Wilcoxon signed-rank test for \
         continuous values; two-sided p-values over the items both variants scored.</p>\
         <table><thead><tr><th>A</th><th>B</th><th>metric</th><th>comparison</th></tr></thead><tbody>",
    );
    for c in &report.comparisons {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.a),
            escape(&c.b),
            escape(c.metric.as_str()),
            escape(&c.describe())
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// Line-rate STEF rows per finding code and variant (errors and warnings).
fn findings_table(report: &RunReport) -> String {
    let codes: std::collections::BTreeSet<&String> = report
        .variants
        .values()
        .flat_map(|v| v.findings.keys())
        .collect();
    if codes.is_empty() {
        return "<p>No finding fired.</p>".to_string();
    }
    let mut out = String::from("<table id=\"findings\"><tr><th>finding</th>");
    for name in report.variants.keys() {
        out.push_str(&format!("<th>{}</th>", escape(name)));
    }
    out.push_str("</tr>");
    for code in codes {
        out.push_str(&format!("<tr><td><code>{}</code></td>", escape(code)));
        for v in report.variants.values() {
            let n = v.findings.get(code).copied().unwrap_or(0);
            let pct = if v.events == 0 {
                0.0
            } else {
                100.0 * n as f64 / v.events as f64
            };
            out.push_str(&format!("<td>{n} ({pct:.1}%)</td>"));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table><p>Rows of the line-rate STEF metric that raised each code; a row counts once per code. docs/reference/findings.md says what each means and how often it is right.</p>");
    out
}

/// The whole page.
pub fn render(report: &RunReport) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>sqlgrade report — {run}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
h1 {{ font-size: 1.5rem; }} h2 {{ font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }}
pre {{ margin: 0; white-space: pre-wrap; max-width: 36rem; font-size: 12px; }}
.multiples {{ display: flex; flex-wrap: wrap; gap: 1rem; }}
figure {{ margin: 0; }} figcaption {{ font-size: 12px; text-align: center; }}
.legend span {{ margin-right: 1rem; font-size: 12px; }}
.legend i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }}
</style></head>
<body>
<h1>sqlgrade report — run <code>{run}</code></h1>
<p>{rows} evaluation rows, {variants} variant(s). Generated {generated}.</p>
<h2>Summary</h2>
{summary}
<h2>STEF Φ distribution per agent version</h2>
{histograms}
<h2>Quality tier shares</h2>
{tiers}
<h2>Per-metric comparison</h2>
{metrics}
{intervals}
<h2>STEF findings per agent version</h2>
{findings}
<h2>Paired comparisons</h2>
{comparisons}
<h2>EX vs FLEX/ROSE disagreements, and EX matches refuted by a counterexample ({n_dis})</h2>
{dis}
</body></html>
"#,
        run = escape(&report.run_id),
        rows = report.rows,
        variants = report.variants.len(),
        generated = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        summary = summary_table(report),
        histograms = phi_histograms(report),
        tiers = tier_bars(report),
        metrics = metric_bars(report),
        intervals = interval_table(report),
        comparisons = comparison_table(report),
        findings = findings_table(report),
        n_dis = report.disagreements.len(),
        dis = disagreements(report),
    )
}

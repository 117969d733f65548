//! The SVG plot of the handoff scenario: gap p99 against the number of
//! waiters (one process), one line per library, log–log, with the PING round
//! trip of the same run, and latchkey's target (5× that), as dashed references.
//!
//! ```text
//! plot::handoff_p99(&[("latchkey".into(), vec![(1.0, 180.0), (8.0, 210.0)])], ping)?;
//! // -> writes bench/handoff_p99.svg
//! ```
//!
//! plotters is built with its SVG backend only: no bitmap encoders and no
//! font files (the SVG names a font family; text extents are estimated).

use std::time::Duration;

use plotters::prelude::*;

/// One color per library, in the order of [`crate::peers::HANDOFF`]
/// (latchkey first, in red).
const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Where the plot goes, relative to the repository root.
pub const PATH: &str = "bench/handoff_p99.svg";

/// Writes the plot; returns its path relative to the repository root.
pub fn handoff_p99(
    series: &[(String, Vec<(f64, f64)>)],
    ping: Duration,
) -> Result<&'static str, String> {
    let path = crate::peers::repo_root().join(PATH);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    draw(&path, series, ping.as_secs_f64() * 1e6).map_err(|e| e.to_string())?;
    Ok(PATH)
}

fn draw(
    path: &std::path::Path,
    series: &[(String, Vec<(f64, f64)>)],
    ping_us: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let values = series.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1));
    let (lo, hi) = values.fold((ping_us, ping_us), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // Headroom above the highest point (2.5 decades) keeps the legend in the
    // upper left clear of the data.
    let (y_lo, y_hi) = (lo.max(1.0) / 2.0, hi * 300.0);

    let root = SVGBackend::new(path, (860, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Handoff gap p99 vs waiters (one process, same server, same run)",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (0.8f64..80f64)
                .log_scale()
                .with_key_points(vec![1.0, 8.0, 64.0]),
            (y_lo..y_hi).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("waiters")
        .y_desc("gap p99 (µs, log)")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;

    let grey = RGBColor(120, 120, 120);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.8, ping_us), (80.0, ping_us)],
            6,
            4,
            grey.stroke_width(1),
        ))?
        .label(format!("PING round trip ({ping_us:.0} µs)"))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey));

    let target = 5.0 * ping_us;
    let pink = RGBColor(214, 39, 40).mix(0.45);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.8, target), (80.0, target)],
            3,
            5,
            pink.stroke_width(1),
        ))?
        .label(format!("latchkey target: 5× PING ({target:.0} µs)"))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], pink));

    for (i, (label, points)) in series.iter().enumerate() {
        // By library, not by position: a skipped peer does not shift colors.
        let slot = crate::peers::HANDOFF
            .iter()
            .position(|lib| lib.label == label)
            .unwrap_or(i);
        let color = COLORS[slot % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_one_line_per_library_and_the_ping_reference() {
        let path = std::env::temp_dir().join(format!("latchkey-plot-{}.svg", std::process::id()));
        let series = vec![
            (
                "latchkey".to_owned(),
                vec![(1.0, 250.0), (8.0, 260.0), (64.0, 300.0)],
            ),
            (
                "redis-py Lock".to_owned(),
                vec![(1.0, 100_000.0), (8.0, 101_000.0), (64.0, 90_000.0)],
            ),
        ];
        draw(&path, &series, 60.0).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("latchkey") && svg.contains("redis-py Lock"));
        assert!(svg.contains("PING round trip (60 µs)"));
        // Two data lines (three points each) besides axes and legend marks.
        assert!(svg.matches("stroke-width=\"2\" points=").count() >= 2);
    }
}

//! The scale scenario's SVG: hand-off gap p99 (and p50, dashed) against the
//! number of waiters in one process, plain and fair lock, log–log, with the
//! target (3× the p99 at the fewest waiters) as a dashed reference.
//!
//! ```text
//! plot::write(&rows)?;   // -> bench/scale.svg
//! ```

use plotters::prelude::*;

use super::waiters::Row;

/// Where the plot goes, relative to the repository root.
pub const PATH: &str = "bench/scale.svg";

pub fn write(rows: &[Row]) -> Result<&'static str, String> {
    let path = crate::peers::repo_root().join(PATH);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    draw(&path, rows).map_err(|e| e.to_string())?;
    Ok(PATH)
}

fn draw(path: &std::path::Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    let ys = rows.iter().flat_map(|r| [us(r.p50), us(r.p99)]);
    let (lo, hi) = ys.fold((f64::MAX, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (y_lo, y_hi) = (lo.max(1.0) / 2.0, hi * 30.0);
    let x_hi = rows.iter().map(|r| r.waiters).max().unwrap_or(8) as f64 * 1.5;
    let keys: Vec<f64> = {
        let mut k: Vec<f64> = rows.iter().map(|r| r.waiters as f64).collect();
        k.dedup();
        k
    };

    let root = SVGBackend::new(path, (860, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Hand-off gap vs waiters on one lock (one process, same run)",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (5.0f64..x_hi).log_scale().with_key_points(keys),
            (y_lo..y_hi).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("waiting tasks (log)")
        .y_desc("gap µs (log)")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;

    for (fair, color) in [
        (false, RGBColor(214, 39, 40)),
        (true, RGBColor(31, 119, 180)),
    ] {
        let name = if fair { "fair" } else { "plain" };
        let mine: Vec<&Row> = rows.iter().filter(|r| r.fair == fair).collect();
        let p99: Vec<(f64, f64)> = mine.iter().map(|r| (r.waiters as f64, us(r.p99))).collect();
        let p50: Vec<(f64, f64)> = mine.iter().map(|r| (r.waiters as f64, us(r.p50))).collect();
        chart
            .draw_series(LineSeries::new(p99.iter().copied(), color.stroke_width(2)))?
            .label(format!("{name}: p99"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(p99.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
        chart
            .draw_series(DashedLineSeries::new(p50, 6, 4, color.stroke_width(1)))?
            .label(format!("{name}: p50"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        if let Some(first) = p99.first() {
            let target = 3.0 * first.1;
            let faint = color.mix(0.4);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(5.0, target), (x_hi, target)],
                    3,
                    5,
                    faint.stroke_width(1),
                ))?
                .label(format!(
                    "{name} target: 3× p99 at {} ({target:.0} µs)",
                    first.0
                ))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], faint));
        }
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
    use std::time::Duration;

    use super::*;

    fn row(waiters: usize, fair: bool, p99_us: u64) -> Row {
        Row {
            waiters,
            fair,
            p50: Duration::from_micros(p99_us / 2),
            p99: Duration::from_micros(p99_us),
            p99_range: (Duration::ZERO, Duration::ZERO),
            rounds: 1,
            handoffs: 1,
            handoffs_per_sec: 1.0,
            cmds_per_handoff: 2.0,
            redis_us_per_handoff: 1.0,
            client_us_per_handoff: 1.0,
            idle_redis_ms_per_sec: 1.0,
            idle_cmds_per_sec: 0.0,
            rss_per_waiter: 0.0,
        }
    }

    #[test]
    fn draws_plain_and_fair_with_their_targets() {
        let path = std::env::temp_dir().join(format!("latchkey-scale-{}.svg", std::process::id()));
        let rows = vec![
            row(8, false, 150),
            row(4096, false, 300),
            row(8, true, 280),
            row(4096, true, 40_000),
        ];
        draw(&path, &rows).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("plain: p99") && svg.contains("fair: p99"));
        assert!(svg.contains("3× p99 at 8 (450 µs)"));
        // The median round: the middle p99, with the range of all three.
        let mid = crate::scale::waiters::median_round(vec![
            row(8, false, 300),
            row(8, false, 100),
            row(8, false, 200),
        ])
        .unwrap();
        assert_eq!(mid.p99, Duration::from_micros(200));
        assert_eq!(mid.p99_range.1, Duration::from_micros(300));
        assert_eq!(mid.rounds, 3);
    }
}

//! `polycc trace --png`: a trace drawn as stacked panels over the same time axis (seconds from
//! the trace's start): the window; the rate and the throughput; RTT min and mean; and a strip of
//! the fusion's members, each second split by the share of its decisions each member won.
//!
//! Drawn with plotters into an RGB buffer and encoded with png; the text is DejaVu Sans,
//! embedded and rendered by ab_glyph, so nothing is read from the system's fonts.

use crate::trace::{rate, Trace};
use plotters::coord::Shift;
use plotters::prelude::*;
use polycc_agent::stats::StatsRecord;
use std::sync::OnceLock;

pub const CWND_COLOR: RGBColor = RGBColor(31, 119, 180);
pub const RATE_COLOR: RGBColor = RGBColor(255, 127, 14);
pub const THROUGHPUT_COLOR: RGBColor = RGBColor(44, 160, 44);
pub const RTT_AVG_COLOR: RGBColor = RGBColor(214, 39, 40);
pub const RTT_MIN_COLOR: RGBColor = RGBColor(148, 103, 189);
/// The members' colours, in the order they first won ([`Trace::members`]); a seventh member
/// takes the first colour again.
pub const MEMBER_COLORS: [RGBColor; 6] = [
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
    RGBColor(140, 86, 75),
    RGBColor(0, 0, 128),
    RGBColor(255, 215, 0),
];

/// The plotters font family the text is drawn in; registered once with DejaVu Sans.
const FONT: &str = "sans-serif";

/// The member strip's share of the height under the title; the three line panels split the rest.
const STRIP_FRACTION: f64 = 0.16;

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

fn font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "the embedded font does not load".to_string())
        })
        .clone()
}

/// A series' points: (seconds from the start, value), `None` where a second has no value.
type Points = Vec<(f64, Option<f64>)>;

/// The PNG of trace `t`, `size` = (width, height) pixels.
pub fn render(t: &Trace, size: (u32, u32)) -> Result<Vec<u8>, String> {
    font()?;
    let (w, h) = size;
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    draw(t, &BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area()).map_err(|e| e.to_string())?;
    encode(&rgb, w, h).map_err(|e| e.to_string())
}

fn draw(t: &Trace, root: &Area<'_>) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let title = if t.records.is_empty() { format!("{} (no records)", t.title) } else { t.title.clone() };
    let body = root.titled(&title, (FONT, 18))?;
    let height = body.dim_in_pixel().1 as f64;
    let panel = ((1.0 - STRIP_FRACTION) * height / 3.0) as i32;
    let areas = body.split_by_breakpoints([] as [i32; 0], [panel, 2 * panel, 3 * panel]);
    let t0 = t.t0();
    let x_max = t.records.last().map_or(1.0, |r| r.t_unix_s - t0).max(1.0);
    let points = |f: &dyn Fn(&StatsRecord) -> Option<f64>| -> Points {
        t.records.iter().map(|r| (r.t_unix_s - t0, f(r))).collect()
    };
    line_panel(
        &areas[0],
        x_max,
        "cwnd (KB)",
        &[("cwnd", CWND_COLOR, points(&|r| r.cwnd_bytes.map(|b| b as f64 / 1e3)))],
    )?;
    let mbps = |v: f64| v * 8.0 / 1e6;
    line_panel(
        &areas[1],
        x_max,
        "Mbit/s",
        &[
            ("rate (pacing, else cwnd/RTT)", RATE_COLOR, points(&|r| rate(r).map(|(v, _)| mbps(v)))),
            ("throughput", THROUGHPUT_COLOR, points(&|r| Some(mbps(r.throughput_bytes_per_sec)))),
        ],
    )?;
    line_panel(
        &areas[2],
        x_max,
        "RTT (ms)",
        &[
            ("RTT mean", RTT_AVG_COLOR, points(&|r| r.rtt_avg_us.map(|us| us / 1e3))),
            ("RTT min", RTT_MIN_COLOR, points(&|r| r.rtt_min_us.map(|us| us / 1e3))),
        ],
    )?;
    member_strip(&areas[3], t, x_max)?;
    root.present()?;
    Ok(())
}

/// Consecutive seconds with a value: each is one line (a gap breaks it).
fn runs(points: &Points) -> Vec<Vec<(f64, f64)>> {
    let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current = Vec::new();
    for &(x, y) in points {
        match y.filter(|y| y.is_finite()) {
            Some(y) => current.push((x, y)),
            None if !current.is_empty() => runs.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

fn line_panel(
    area: &Area<'_>,
    x_max: f64,
    y_desc: &str,
    series: &[(&str, RGBColor, Points)],
) -> Result<(), Box<dyn std::error::Error>> {
    let peak = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().filter_map(|(_, y)| *y))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let y_max = if peak > 0.0 { peak * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .margin_right(24)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("s")
        .y_desc(y_desc)
        .label_style((FONT, 13))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()?;
    for (name, color, points) in series {
        let style = color.stroke_width(2);
        let mut labelled = false;
        for run in runs(points) {
            let drawn = if run.len() == 1 {
                chart.draw_series(run.into_iter().map(|p| Circle::new(p, 3, color.filled())))?
            } else {
                chart.draw_series(LineSeries::new(run, style))?
            };
            if !labelled {
                drawn.label(*name).legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
                labelled = true;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(190, 190, 190))
        .label_font((FONT, 13))
        .draw()?;
    Ok(())
}

/// Each second a column, split bottom-up by each member's share of its decisions (all of it
/// to the second's last member when the record has no shares).
fn member_strip(area: &Area<'_>, t: &Trace, x_max: f64) -> Result<(), Box<dyn std::error::Error>> {
    let members = t.members();
    let color = |name: &str| members.iter().position(|m| m == name).map(|i| MEMBER_COLORS[i % MEMBER_COLORS.len()]);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .margin_right(24)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..1.0)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("s")
        .y_desc("member")
        .y_labels(2)
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .label_style((FONT, 13))
        .draw()?;
    if members.is_empty() {
        let note = "not a fusion: one algorithm makes every decision";
        chart.draw_series(std::iter::once(Text::new(note, (x_max * 0.02, 0.6), (FONT, 14))))?;
        return Ok(());
    }
    let t0 = t.t0();
    let mut blocks = Vec::new();
    for r in &t.records {
        let (x0, x1) = (r.t_unix_s - r.duration_s - t0, r.t_unix_s - t0);
        let shares: Vec<(&str, f64)> = if r.fusion_win_frac.is_empty() {
            r.fusion_member.iter().map(|m| (m.as_str(), 1.0)).collect()
        } else {
            members.iter().filter_map(|m| r.fusion_win_frac.get(m).map(|f| (m.as_str(), *f))).collect()
        };
        let mut y = 0.0;
        for (name, share) in shares {
            if let Some(c) = color(name) {
                blocks.push(Rectangle::new([(x0, y), (x1, (y + share).min(1.0))], c.filled()));
            }
            y += share;
        }
    }
    chart.draw_series(blocks)?;
    for name in &members {
        let c = color(name).unwrap_or(BLACK);
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(190, 190, 190))
        .label_font((FONT, 13))
        .draw()?;
    Ok(())
}

fn encode(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use polycc_agent::control::FlowRow;
    use polycc_agent::stats::FlowMeta;

    /// The decoded picture: width, height, RGB rows.
    struct Picture {
        w: usize,
        h: usize,
        rgb: Vec<u8>,
    }

    impl Picture {
        fn decode(png_bytes: &[u8]) -> Picture {
            let mut reader = png::Decoder::new(std::io::Cursor::new(png_bytes)).read_info().expect("a PNG");
            let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
            let info = reader.next_frame(&mut rgb).unwrap();
            assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
            Picture { w: info.width as usize, h: info.height as usize, rgb }
        }

        fn at(&self, x: usize, y: usize) -> RGBColor {
            let i = (y * self.w + x) * 3;
            RGBColor(self.rgb[i], self.rgb[i + 1], self.rgb[i + 2])
        }

        /// The rows of column `x` in colour `c`.
        fn rows_of(&self, x: usize, c: RGBColor) -> Vec<usize> {
            (0..self.h).filter(|&y| self.at(x, y) == c).collect()
        }

        /// Pixels of colour `c` in rows `rows`.
        fn count(&self, c: RGBColor, rows: std::ops::Range<usize>) -> usize {
            rows.flat_map(|y| (0..self.w).map(move |x| (x, y))).filter(|&(x, y)| self.at(x, y) == c).count()
        }
    }

    fn mean(v: &[usize]) -> f64 {
        v.iter().sum::<usize>() as f64 / v.len() as f64
    }

    /// 30 seconds of a fused flow: the window 100, 200 then 300 KB for 10 s each; BBR wins the
    /// first 15 s, CUBIC the rest.
    fn trace() -> Trace {
        let row = FlowRow {
            flow: 7,
            datapath: "dp".into(),
            src: "10.0.0.1:40000".into(),
            dst: "10.1.0.1:5201".into(),
            policy: "fused(bbr+cubic,max cwnd)".into(),
            ..FlowRow::default()
        };
        let mut t = Trace::of(&row);
        t.add(
            (1..=30)
                .map(|s| StatsRecord {
                    seq: s,
                    t_unix_s: 1_000.0 + s as f64,
                    duration_s: 1.0,
                    meta: FlowMeta { datapath: "dp".into(), flow: 7, ..FlowMeta::default() },
                    cwnd_bytes: Some(100_000 * (1 + (s - 1) / 10)),
                    pacing_rate_bytes_per_sec: Some(1.25e6),
                    throughput_bytes_per_sec: 1e6 + 1e4 * s as f64,
                    rtt_min_us: Some(40_000.0),
                    rtt_avg_us: Some(50_000.0 + 1e3 * (s % 5) as f64),
                    fusion_member: Some(if s <= 15 { "bbr" } else { "cubic" }.into()),
                    ..StatsRecord::default()
                })
                .collect(),
        );
        t
    }

    #[test]
    fn the_png_has_the_asked_size_and_every_panel_draws() {
        let png_bytes = render(&trace(), (900, 700)).unwrap();
        assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
        let p = Picture::decode(&png_bytes);
        assert_eq!((p.w, p.h), (900, 700));
        let whole = 0..p.h;
        for (name, c) in [
            ("cwnd", CWND_COLOR),
            ("rate", RATE_COLOR),
            ("throughput", THROUGHPUT_COLOR),
            ("RTT mean", RTT_AVG_COLOR),
            ("RTT min", RTT_MIN_COLOR),
            ("bbr", MEMBER_COLORS[0]),
            ("cubic", MEMBER_COLORS[1]),
        ] {
            assert!(p.count(c, whole.clone()) > 100, "{name} is drawn");
        }
        // Top to bottom: cwnd, then rate and throughput, then RTT, then the members.
        let first_row = |c| (0..p.h).find(|&y| p.count(c, y..y + 1) > 20).unwrap();
        let order = [CWND_COLOR, THROUGHPUT_COLOR, RTT_MIN_COLOR, MEMBER_COLORS[0]].map(first_row);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "panels stacked in order: rows {order:?}");
    }

    /// The window steps 100 -> 200 -> 300 KB: on a linear axis from 0 the line's three levels
    /// are evenly spaced, the higher the value the higher up.
    #[test]
    fn the_cwnd_line_is_where_the_values_say() {
        let p = Picture::decode(&render(&trace(), (1200, 900)).unwrap());
        // Middle of each 10 s step: 5, 15, 25 s of a 30 s axis drawn from x = 8 + 64 to 1200 - 24.
        let x_of = |s: f64| (72.0 + s / 30.0 * (1200.0 - 24.0 - 72.0)) as usize;
        let levels: Vec<f64> = [5.0, 15.0, 25.0].iter().map(|&s| mean(&p.rows_of(x_of(s), CWND_COLOR))).collect();
        assert!(levels[0] > levels[1] && levels[1] > levels[2], "{levels:?}");
        let (step1, step2) = (levels[0] - levels[1], levels[1] - levels[2]);
        assert!((step1 - step2).abs() <= 2.0, "100 KB is as many pixels at each step: {levels:?}");
        // The y axis runs to 1.1 x the peak (330 KB) over a panel of ~(900 - title) x 0.84 / 3.
        assert!((60.0..80.0).contains(&step1), "{levels:?}");
    }

    #[test]
    fn the_member_strip_changes_colour_where_the_fusion_changes_member() {
        let p = Picture::decode(&render(&trace(), (1200, 900)).unwrap());
        let strip_row = (0..p.h).rev().find(|&y| p.count(MEMBER_COLORS[0], y..y + 1) > 100).unwrap();
        let run: Vec<RGBColor> = (0..p.w).map(|x| p.at(x, strip_row)).collect();
        let bbr: Vec<usize> = (0..p.w).filter(|&x| run[x] == MEMBER_COLORS[0]).collect();
        let cubic: Vec<usize> = (0..p.w).filter(|&x| run[x] == MEMBER_COLORS[1]).collect();
        assert!(!bbr.is_empty() && !cubic.is_empty());
        // BBR from 0 to 15 s, CUBIC from 15 to 30 s: they meet half way along the axis.
        let (last_bbr, first_cubic) = (*bbr.last().unwrap(), cubic[0]);
        assert!(first_cubic - last_bbr <= 2, "{last_bbr} {first_cubic}");
        let middle = 72.0 + 0.5 * (1200.0 - 24.0 - 72.0);
        assert!((first_cubic as f64 - middle).abs() < 4.0, "{first_cubic} vs {middle}");
        assert!(bbr.len().abs_diff(cubic.len()) < 8, "15 s each: {} vs {}", bbr.len(), cubic.len());
    }

    #[test]
    fn a_trace_without_records_or_fusion_still_draws() {
        let row = FlowRow { flow: 3, datapath: "dp".into(), policy: "reno".into(), ..FlowRow::default() };
        let p = Picture::decode(&render(&Trace::of(&row), (400, 300)).unwrap());
        assert_eq!((p.w, p.h), (400, 300));
        assert!(p.count(RGBColor(0, 0, 0), 0..p.h) > 100, "axes and text");
    }
}

//! The report `cargo offload profile` writes: one self-contained HTML file (or an SVG image)
//! holding the per-kernel table, the timeline of launches and copies per stream, and a
//! roofline of the kernels against the device's peak figures. Everything is inline: no
//! script, style or font is fetched, so the file opens anywhere, offline.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::record::{KernelSummary, Peaks, Run, rate, time};

/// Colours of the kernels, in the order of the summary (then again).
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];
/// The colour of copies.
const COPY: &str = "#7f7f7f";
/// Launches and copies drawn at most: a longer run's timeline shows its first ones.
const MAX_BARS: usize = 20_000;

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
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

fn colours(rows: &[KernelSummary]) -> HashMap<&str, &'static str> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| (r.kernel.as_str(), PALETTE[i % PALETTE.len()]))
        .collect()
}

/// The timeline: one lane per stream, each launch a bar in its kernel's colour, each copy a
/// grey bar, with a tooltip (`<title>`) naming it.
pub fn timeline_svg(run: &Run, rows: &[KernelSummary], y_offset: u32) -> String {
    let colour = colours(rows);
    let mut streams: Vec<u64> = run
        .launches
        .iter()
        .map(|l| l.stream)
        .chain(run.copies.iter().map(|c| c.stream))
        .collect();
    streams.sort_unstable();
    streams.dedup();
    let start = run
        .launches
        .iter()
        .map(|l| l.start_ns)
        .chain(run.copies.iter().map(|c| c.start_ns))
        .min()
        .unwrap_or(0);
    let end = run
        .launches
        .iter()
        .map(|l| l.start_ns + l.duration_ns)
        .chain(run.copies.iter().map(|c| c.start_ns + c.duration_ns))
        .max()
        .unwrap_or(1)
        .max(start + 1);
    let (left, width, lane) = (110.0, 860.0, 34.0);
    let height = 40.0 + lane * streams.len().max(1) as f64;
    let x = |ns: u64| left + (ns - start) as f64 / (end - start) as f64 * width;
    let mut svg = format!(
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" y=\"{y_offset}\" \
         width=\"1000\" height=\"{height}\" viewBox=\"0 0 1000 {height}\" \
         data-launches=\"{}\" data-copies=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        run.launches.len(),
        run.copies.len()
    );
    let _ = writeln!(
        svg,
        "<text x=\"{left}\" y=\"14\" font-weight=\"bold\">Timeline: launches and copies per \
         stream ({})</text>",
        time(end - start)
    );
    for (i, stream) in streams.iter().enumerate() {
        let y = 24.0 + lane * i as f64;
        let name = if *stream == 0 {
            "device".to_owned()
        } else {
            format!("stream {stream}")
        };
        let _ = writeln!(
            svg,
            "<text x=\"4\" y=\"{}\">{name}</text><line x1=\"{left}\" x2=\"{}\" y1=\"{}\" \
             y2=\"{}\" stroke=\"#ddd\"/>",
            y + 18.0,
            left + width,
            y + lane - 2.0,
            y + lane - 2.0
        );
    }
    let lane_of = |stream: u64| streams.iter().position(|&s| s == stream).unwrap_or(0);
    for launch in run.launches.iter().take(MAX_BARS) {
        let y = 24.0 + lane * lane_of(launch.stream) as f64;
        let (x0, x1) = (x(launch.start_ns), x(launch.start_ns + launch.duration_ns));
        let _ = writeln!(
            svg,
            "<rect class=\"launch\" data-kernel=\"{k}\" x=\"{x0:.2}\" y=\"{y}\" width=\"{:.2}\" \
             height=\"26\" fill=\"{}\"><title>{m}::{k}: {}</title></rect>",
            (x1 - x0).max(0.8),
            colour.get(launch.kernel.as_str()).unwrap_or(&PALETTE[0]),
            time(launch.duration_ns),
            k = escape(&launch.kernel),
            m = escape(&launch.module),
        );
    }
    for copy in run.copies.iter().take(MAX_BARS) {
        let y = 24.0 + lane * lane_of(copy.stream) as f64;
        let (x0, x1) = (x(copy.start_ns), x(copy.start_ns + copy.duration_ns));
        let _ = writeln!(
            svg,
            "<rect class=\"copy\" x=\"{x0:.2}\" y=\"{}\" width=\"{:.2}\" height=\"10\" \
             fill=\"{COPY}\"><title>copy {} of {} bytes: {}</title></rect>",
            y + 8.0,
            (x1 - x0).max(0.8),
            if copy.to_device {
                "to the device"
            } else {
                "to the host"
            },
            copy.bytes,
            time(copy.duration_ns)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The roofline: log-log, arithmetic intensity (FLOP per byte of the kernel's buffers)
/// against FLOP/s, the roof the lower of the peak bandwidth times the intensity and the peak
/// FLOP/s; one point per kernel whose FLOPs the program declared.
pub fn roofline_svg(rows: &[KernelSummary], peaks: &Peaks, y_offset: u32) -> String {
    let colour = colours(rows);
    let points: Vec<(&KernelSummary, f64, f64)> = rows
        .iter()
        .filter_map(|r| {
            let intensity = r.flops? as f64 / r.bytes? as f64;
            Some((r, intensity, r.flops_per_second?))
        })
        .filter(|(_, i, f)| *i > 0.0 && *f > 0.0)
        .collect();
    let (x_lo, x_hi) = (2f64.powi(-6), 2f64.powi(10));
    let top = peaks
        .flops_per_second
        .into_iter()
        .chain(points.iter().map(|p| p.2))
        .fold(1e6, f64::max)
        * 2.0;
    let bottom = points
        .iter()
        .map(|p| p.2)
        .fold(top / 1e5, f64::min)
        .max(1.0)
        / 2.0;
    let (left, width, top_px, plot_h) = (110.0, 560.0, 30.0, 300.0);
    let px = |i: f64| left + (i.clamp(x_lo, x_hi) / x_lo).log2() / (x_hi / x_lo).log2() * width;
    let py = |f: f64| {
        top_px + plot_h - (f.clamp(bottom, top) / bottom).log10() / (top / bottom).log10() * plot_h
    };
    let mut svg = format!(
        "<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" y=\"{y_offset}\" width=\"1000\" \
         height=\"380\" viewBox=\"0 0 1000 380\" data-points=\"{}\" font-family=\"sans-serif\" \
         font-size=\"12\">\n<text x=\"{left}\" y=\"16\" font-weight=\"bold\">Roofline ({})</text>\n\
         <rect x=\"{left}\" y=\"{top_px}\" width=\"{width}\" height=\"{plot_h}\" fill=\"none\" \
         stroke=\"#888\"/>\n",
        points.len(),
        escape(&peaks.source)
    );
    // Axes: powers of 4 in FLOP/byte, powers of 10 in FLOP/s.
    let mut i = x_lo;
    while i <= x_hi {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            px(i),
            top_px + plot_h + 16.0,
            if i < 1.0 {
                format!("1/{}", (1.0 / i) as u64)
            } else {
                format!("{i}")
            }
        );
        i *= 4.0;
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">FLOP per byte of the kernel's buffers</text>",
        left + width / 2.0,
        top_px + plot_h + 34.0
    );
    let mut decade = 10f64.powf(bottom.log10().ceil());
    while decade <= top {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 4.0,
            py(decade) + 4.0,
            rate(decade, "FLOP/s").replace(".000", "")
        );
        decade *= 10.0;
    }
    if let (Some(bw), Some(peak)) = (peaks.bytes_per_second, peaks.flops_per_second) {
        let ridge = (peak / bw).clamp(x_lo, x_hi);
        let _ = writeln!(
            svg,
            "<polyline class=\"roof\" fill=\"none\" stroke=\"#222\" stroke-width=\"2\" \
             points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\"><title>peaks: {} and {}</title></polyline>",
            px(x_lo),
            py(bw * x_lo),
            px(ridge),
            py(bw * ridge),
            px(x_hi),
            py(peak),
            rate(bw, "B/s"),
            rate(peak, "FLOP/s")
        );
    }
    for (n, (row, intensity, flops)) in points.iter().enumerate() {
        let (cx, cy) = (px(*intensity), py(*flops));
        let _ = writeln!(
            svg,
            "<circle class=\"kernel\" data-kernel=\"{k}\" cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"6\" \
             fill=\"{}\"><title>{k}: {:.3} FLOP/B, {}</title></circle>\
             <text x=\"{:.1}\" y=\"{:.1}\">{k}</text>",
            colour.get(row.kernel.as_str()).unwrap_or(&PALETTE[0]),
            intensity,
            rate(*flops, "FLOP/s"),
            cx + 9.0,
            cy + 4.0 + 14.0 * (n % 2) as f64,
            k = escape(&row.kernel),
        );
    }
    let missing: Vec<&str> = rows
        .iter()
        .filter(|r| !points.iter().any(|p| p.0.kernel == r.kernel))
        .map(|r| r.kernel.as_str())
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" class=\"off-roof\">Not on the roofline (no FLOPs declared \
             with offload_rt::profile::count_flops, or no buffers): {}</text>",
            left + width + 12.0 - width,
            top_px + plot_h + 52.0,
            escape(&missing.join(", "))
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The report as one SVG image: the timeline above the roofline.
pub fn svg(run: &Run, rows: &[KernelSummary], peaks: &Peaks) -> String {
    let timeline = timeline_svg(run, rows, 0);
    let height: u32 = timeline
        .split("height=\"")
        .nth(1)
        .and_then(|h| h.split('"').next())
        .and_then(|h| h.parse::<f64>().ok())
        .map_or(100, |h| h as u32);
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"1000\" height=\"{}\" viewBox=\"0 0 1000 {}\">\n<rect width=\"100%\" \
         height=\"100%\" fill=\"white\"/>\n{timeline}{}</svg>\n",
        height + 390,
        height + 390,
        roofline_svg(rows, peaks, height + 10)
    )
}

/// The report as one self-contained HTML page.
pub fn html(run: &Run, rows: &[KernelSummary], peaks: &Peaks, hot_lines: &[String]) -> String {
    let title = format!("Profile: {}", run.device);
    let mut table = String::from(
        "<table id=\"kernels\"><thead><tr><th>kernel</th><th>launches</th><th>total</th>\
         <th>mean</th><th>share</th><th>bandwidth</th><th>FLOP/s</th></tr></thead><tbody>\n",
    );
    let colour = colours(rows);
    for row in rows {
        let _ = writeln!(
            table,
            "<tr data-kernel=\"{k}\"><td><span class=\"swatch\" style=\"background:{}\"></span>\
             {m}::{k}</td><td>{}</td><td data-ns=\"{}\">{}</td><td>{}</td><td>{:.1}%</td>\
             <td>{}</td><td>{}</td></tr>",
            colour.get(row.kernel.as_str()).unwrap_or(&PALETTE[0]),
            row.launches,
            row.total_ns,
            time(row.total_ns),
            time(row.mean_ns),
            row.share * 100.0,
            row.bytes_per_second
                .map_or("-".to_owned(), |b| rate(b, "B/s")),
            row.flops_per_second
                .map_or("-".to_owned(), |f| rate(f, "FLOP/s")),
            k = escape(&row.kernel),
            m = escape(&row.module),
        );
    }
    table.push_str("</tbody></table>\n");
    let lines = if hot_lines.is_empty() {
        String::new()
    } else {
        format!(
            "<h2>Hot lines</h2>\n<pre id=\"hot-lines\">{}</pre>\n",
            escape(&hot_lines.join("\n"))
        )
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{t}</title>\n<style>\
         body{{font-family:sans-serif;margin:1.5em;color:#222}}\
         table{{border-collapse:collapse}}\
         td,th{{padding:3px 10px;text-align:right;white-space:nowrap}}\
         svg{{max-width:100%;height:auto}}\
         td:first-child,th:first-child{{text-align:left}}tr:nth-child(even){{background:#f4f4f4}}\
         .swatch{{display:inline-block;width:10px;height:10px;margin-right:6px}}\
         .dim{{opacity:.25}}\
         </style></head>\n<body>\n<script>window.addEventListener('error',function(e){{\
         document.documentElement.setAttribute('data-script-error',String(e.message));}});\
         </script>\n<h1>{t}</h1>\n<p>Timed by {timer}. Peaks: {peaks_text}.</p>\n{table}\
         <h2>Timeline</h2>\n{timeline}<h2>Roofline</h2>\n{roofline}{lines}\
         <script>\n(function(){{\n\
         var rows=document.querySelectorAll('#kernels tbody tr');\n\
         var marks=document.querySelectorAll('[data-kernel]');\n\
         rows.forEach(function(row){{\n\
           row.addEventListener('mouseenter',function(){{var k=row.getAttribute('data-kernel');\n\
             marks.forEach(function(m){{if(m.tagName!=='TR'&&m.getAttribute('data-kernel')!==k)m.classList.add('dim');}});}});\n\
           row.addEventListener('mouseleave',function(){{marks.forEach(function(m){{m.classList.remove('dim');}});}});\n\
         }});\n\
         var drawn=document.querySelectorAll('#timeline rect.launch').length;\n\
         document.documentElement.setAttribute('data-drawn-launches',String(drawn));\n\
         document.documentElement.setAttribute('data-report-ready','1');\n\
         }})();\n</script>\n</body></html>\n",
        t = escape(&title),
        timer = run.timer.name(),
        peaks_text = escape(&peaks_text(peaks)),
        timeline = timeline_svg(run, rows, 0),
        roofline = roofline_svg(rows, peaks, 0),
    )
}

fn peaks_text(peaks: &Peaks) -> String {
    let mut parts = Vec::new();
    if let Some(b) = peaks.bytes_per_second {
        parts.push(rate(b, "B/s"));
    }
    if let Some(f) = peaks.flops_per_second {
        parts.push(rate(f, "FLOP/s"));
    }
    if parts.is_empty() {
        parts.push("unknown".to_owned());
    }
    format!("{} ({})", parts.join(", "), peaks.source)
}

#[cfg(test)]
mod tests {
    use super::super::record::{Launch, Timer, summarize};
    use super::*;

    fn run() -> Run {
        let launch = |kernel: &str, stream, start_ns, duration_ns| Launch {
            kernel: kernel.to_owned(),
            module: "k<&>".to_owned(),
            stream,
            start_ns,
            duration_ns,
            bytes: Some(4096),
        };
        Run {
            timer: Timer::OffloadRt,
            device: "cpu".to_owned(),
            launches: vec![launch("a", 0, 0, 100), launch("b", 3, 50, 400)],
            copies: Vec::new(),
            flops: [("a".to_owned(), 1 << 20)].into(),
            bytes_per_launch: HashMap::new(),
            images: Vec::new(),
            summed: Vec::new(),
            summed_copies: [0; 3],
            peaks: None,
        }
    }

    #[test]
    fn the_report_names_every_kernel_and_draws_both_plots() {
        let run = run();
        let rows = summarize(&run);
        let peaks = Peaks {
            bytes_per_second: Some(1e10),
            flops_per_second: Some(1e11),
            source: "test".to_owned(),
        };
        let page = html(&run, &rows, &peaks, &["lib.rs:3  50.0%".to_owned()]);
        assert!(page.contains("k&lt;&amp;&gt;::a"), "names are escaped");
        assert_eq!(page.matches("class=\"launch\"").count(), 2);
        assert!(page.contains(">stream 3</text>"));
        assert!(page.contains("class=\"roof\""));
        assert!(
            page.contains("data-points=\"1\""),
            "a is on the roofline, b is not"
        );
        assert!(page.contains("Not on the roofline"));
        assert!(!page.contains("http://") || !page.contains("src=\"http"));
        assert!(!page.contains("<link"), "nothing is fetched");
        let image = svg(&run, &rows, &peaks);
        assert!(image.starts_with("<?xml"));
        assert_eq!(image.matches("class=\"launch\"").count(), 2);
    }
}

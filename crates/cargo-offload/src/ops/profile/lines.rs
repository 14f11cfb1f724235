//! Where in its source a kernel on the CPU device spends its time: `perf`'s samples of the
//! run, those in the CPU device's images (written to files for the run, so that `perf` names
//! them), mapped to source lines through the images' line tables by `llvm-symbolizer`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use offload_build::tooling::command;

/// How many lines of each kernel are shown.
const LINES_PER_KERNEL: usize = 5;

/// One source line and the samples taken there.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HotLine {
    /// The kernel the samples were taken in.
    pub kernel: String,
    /// `file:line`.
    pub location: String,
    pub samples: u64,
    /// Of the kernel's samples, 0 to 1.
    pub share: f64,
    /// The line's text, where the file can be read.
    pub source: Option<String>,
}

/// What the samples gave.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Lines {
    pub hot: Vec<HotLine>,
    /// Samples in the CPU device's images, and of those the ones without a line.
    pub samples: u64,
    pub without_line: u64,
}

impl Lines {
    /// Why no line was found, where none was.
    pub fn why_none(&self) -> Option<&'static str> {
        if !self.hot.is_empty() || self.samples == 0 {
            return None;
        }
        Some(if self.without_line > 0 {
            "the CPU device's images have no line tables; build with a profile that keeps them \
             (the dev profile does; for --release, `[profile.release] debug = \
             \"line-tables-only\"` in the workspace's Cargo.toml)"
        } else {
            "no sample in the CPU device's images fell in a kernel the run launched"
        })
    }
}

/// Samples of `perf script --show-mmap-events -F ip,dso` in files under `image_dir`, counted
/// by `(file, offset in the file)`: the runtime removes its images' files as it unloads
/// them, so `perf` cannot name their symbols; the mappings it recorded give the offsets.
pub fn parse_perf_script(text: &str, image_dir: &Path) -> HashMap<(String, u64), u64> {
    let dir = image_dir.to_string_lossy();
    // Per file: (start, size, offset in the file) of each executable mapping.
    let mut maps: HashMap<&str, Vec<(u64, u64, u64)>> = HashMap::new();
    let mut counts = HashMap::new();
    let hex = |t: &str| u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("PERF_RECORD_MMAP") {
            // `PERF_RECORD_MMAP2 1/1: [0x7f..(0xb000) @ 0x1000 fe:00 1 2]: r-xp /path`
            let Some((range, path)) = rest.split_once("]: ") else {
                continue;
            };
            let path = path.split_once(' ').map_or(path, |(_, p)| p).trim();
            if !path.starts_with(dir.as_ref()) {
                continue;
            }
            let Some(range) = range.split_once('[').map(|(_, r)| r) else {
                continue;
            };
            let mut words = range.split_whitespace();
            let (Some(span), Some("@"), Some(pgoff)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            let Some((start, size)) = span.trim_end_matches(')').split_once('(') else {
                continue;
            };
            if let (Some(start), Some(size), Some(pgoff)) = (hex(start), hex(size), hex(pgoff)) {
                maps.entry(path).or_default().push((start, size, pgoff));
            }
            continue;
        }
        let Some(open) = line.rfind(" (") else {
            continue;
        };
        let dso = line[open + 2..].trim_end_matches(')');
        let Some(ranges) = maps.get(dso) else {
            continue;
        };
        let Some(ip) = line[..open].split_whitespace().next().and_then(hex) else {
            continue;
        };
        if let Some(&(start, _, pgoff)) = ranges
            .iter()
            .rev()
            .find(|&&(start, size, _)| ip >= start && ip - start < size)
        {
            *counts
                .entry((dso.to_owned(), ip - start + pgoff))
                .or_insert(0) += 1;
        }
    }
    counts
}

/// One frame of `llvm-symbolizer`'s answer: function and `file:line:column`.
type Frame = (String, String);

/// `llvm-symbolizer`'s answers, one block of frames (innermost first) per address.
pub fn parse_symbolizer(text: &str) -> Vec<Vec<Frame>> {
    let mut blocks = Vec::new();
    let mut frames = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() {
            if !frames.is_empty() {
                blocks.push(std::mem::take(&mut frames));
            }
            continue;
        }
        let location = lines.next().unwrap_or("??:0:0").trim().to_owned();
        frames.push((line.trim().to_owned(), location));
    }
    if !frames.is_empty() {
        blocks.push(frames);
    }
    blocks
}

/// Whether a source file is the kernel's own rather than the runtime's or the library's.
fn is_user_source(file: &str) -> bool {
    !(file.starts_with("??")
        || file.contains("/rustc/")
        || file.contains("/library/core/")
        || file.contains("/.cargo/registry/")
        || file.contains("offload-rt/src/"))
}

/// The kernel of a sample: the longest of `kernels` that a frame's function names.
fn kernel_of<'a>(frames: &[Frame], kernels: &'a [String]) -> Option<&'a str> {
    kernels
        .iter()
        .filter(|k| {
            frames.iter().any(|(function, _)| {
                function
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|word| {
                        // The CPU device's entry points: the run, regions and thread
                        // prefixes of `offload_format::abi` with the kernel's name.
                        word == k.as_str()
                            || word.starts_with(offload_format::abi::CPU_SYMBOL_PREFIX)
                                && word
                                    .strip_suffix(k.as_str())
                                    .is_some_and(|w| w.ends_with('_'))
                    })
            })
        })
        .max_by_key(|k| k.len())
        .map(String::as_str)
}

/// `file:line` of the frame a sample is charged to: the innermost in the kernel's own source,
/// else the innermost with a line; `None` without line tables.
fn line_of(frames: &[Frame]) -> Option<String> {
    let with_line = |(_, location): &Frame| {
        let mut parts = location.rsplitn(3, ':');
        let (_column, line, file) = (parts.next()?, parts.next()?, parts.next()?);
        (line != "0" && !file.starts_with("??")).then(|| (file.to_owned(), line.to_owned()))
    };
    let here = std::env::current_dir().ok();
    // Paths under the current directory are shown from it.
    let shown = |(file, line): (String, String)| {
        let relative = here
            .as_deref()
            .and_then(|h| Path::new(&file).strip_prefix(h).ok())
            .map(|p| p.to_string_lossy().into_owned());
        (relative.unwrap_or(file), line)
    };
    let located: Vec<(String, String)> = frames.iter().filter_map(with_line).map(shown).collect();
    located
        .iter()
        .find(|(file, _)| is_user_source(file))
        .or_else(|| located.first())
        .map(|(file, line)| format!("{file}:{line}"))
}

/// The text of `file:line`, where it can be read.
fn source_text(location: &str) -> Option<String> {
    let (file, line) = location.rsplit_once(':')?;
    let n: usize = line.parse().ok()?;
    let text = std::fs::read_to_string(file).ok()?;
    Some(text.lines().nth(n.checked_sub(1)?)?.trim().to_owned())
}

/// Maps the samples `counts` to lines with `llvm-symbolizer` (one run per image), charged to
/// the kernels named in `kernels`.
pub fn hot_lines(
    counts: &HashMap<(String, String), u64>,
    kernels: &[String],
    symbolizer: &Path,
) -> Result<Lines> {
    let mut by_image: HashMap<&str, Vec<(&str, u64)>> = HashMap::new();
    for ((image, symbol), &n) in counts {
        by_image.entry(image).or_default().push((symbol, n));
    }
    let mut lines = Lines::default();
    let mut per_kernel: HashMap<&str, HashMap<String, u64>> = HashMap::new();
    for (image, samples) in &by_image {
        let mut cmd = Command::new(symbolizer);
        cmd.arg(format!("--obj={image}"))
            .arg("--functions=linkage")
            .args(samples.iter().map(|(s, _)| s))
            .stdin(Stdio::null());
        let out = command::run(&mut cmd)
            .with_context(|| format!("mapping the samples in {image} to source lines"))?;
        let blocks = parse_symbolizer(&String::from_utf8_lossy(&out.stdout));
        for ((_, n), frames) in samples.iter().zip(blocks) {
            lines.samples += n;
            let Some(kernel) = kernel_of(&frames, kernels) else {
                continue;
            };
            match line_of(&frames) {
                Some(location) => {
                    *per_kernel
                        .entry(kernel)
                        .or_default()
                        .entry(location)
                        .or_insert(0) += n;
                }
                None => lines.without_line += n,
            }
        }
    }
    for kernel in kernels {
        let Some(locations) = per_kernel.get(kernel.as_str()) else {
            continue;
        };
        let total: u64 = locations.values().sum();
        let mut sorted: Vec<(&String, &u64)> = locations.iter().collect();
        sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (location, &samples) in sorted.into_iter().take(LINES_PER_KERNEL) {
            lines.hot.push(HotLine {
                kernel: kernel.clone(),
                location: location.clone(),
                samples,
                share: samples as f64 / total as f64,
                source: source_text(location),
            });
        }
    }
    Ok(lines)
}

/// The hot lines as text, one kernel after another.
pub fn render(lines: &[HotLine]) -> Vec<String> {
    let mut out = Vec::new();
    let mut kernel = None;
    for line in lines {
        if kernel != Some(&line.kernel) {
            out.push(format!("{}:", line.kernel));
            kernel = Some(&line.kernel);
        }
        let mut text = format!(
            "  {:5.1}%  {:>6}  {}",
            line.share * 100.0,
            line.samples,
            line.location
        );
        if let Some(source) = &line.source {
            let _ = write!(text, "  {source}");
        }
        out.push(text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_in_the_images_are_counted_by_offset_in_their_file() {
        let script = "\
            PERF_RECORD_MMAP2 5/5: [0x7f00(0x1000) @ 0x2000 fe:00 1 2]: r-xp /tmp/x/images/libk-5-1.so\n\
            PERF_RECORD_MMAP2 5/5: [0x9000(0x1000) @ 0 fe:00 1 2]: r-xp /usr/lib/libc.so.6\n\
            7f10 (/tmp/x/images/libk-5-1.so)\n\
            7f10 (/tmp/x/images/libk-5-1.so)\n\
            7f20 (/tmp/x/images/libk-5-1.so)\n\
            9004 (/usr/lib/libc.so.6)\n\
            8f00 (/tmp/x/images/libk-5-1.so)\n";
        let counts = parse_perf_script(script, Path::new("/tmp/x/images"));
        let file = "/tmp/x/images/libk-5-1.so".to_owned();
        assert_eq!(counts.len(), 2, "{counts:?}");
        assert_eq!(counts[&(file.clone(), 0x2010)], 2);
        assert_eq!(counts[&(file, 0x2020)], 1);
    }

    #[test]
    fn a_sample_is_charged_to_the_kernels_own_line() {
        use offload_format::abi::{CPU_REGIONS_PREFIX, CPU_RUN_PREFIX};
        let answer = format!(
            "\
            _ZN4core3ptr4read17h\n/rustc/abc/library/core/src/ptr/mod.rs:1200:9\n\
            _ZN9offload_rt6kernel5slice3get17h\n/src/crates/offload-rt/src/kernel/slice.rs:40:5\n\
            {CPU_RUN_PREFIX}saxpy\n/p/kernels/src/lib.rs:14:12\n\n\
            {CPU_REGIONS_PREFIX}other\n??:0:0\n\n"
        );
        let blocks = parse_symbolizer(&answer);
        assert_eq!(blocks.len(), 2);
        let kernels = ["saxpy".to_owned(), "other".to_owned()];
        assert_eq!(kernel_of(&blocks[0], &kernels), Some("saxpy"));
        assert_eq!(
            line_of(&blocks[0]).as_deref(),
            Some("/p/kernels/src/lib.rs:14")
        );
        assert_eq!(kernel_of(&blocks[1], &kernels), Some("other"));
        assert_eq!(line_of(&blocks[1]), None);
    }
}

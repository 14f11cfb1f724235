//! `clang-offload-bundler`'s three modes on files: bundle, unbundle and list.
//!
//! The layout follows the file type as the bundler's does: `i ii cui hipi d ll s` are text
//! bundles, `o` is the object layout when the host input is an object file (sections added
//! by `llvm-objcopy`, as clang does) and the binary layout otherwise, `a` is a device archive
//! (unbundle only), everything else (`bc gch ast`) the binary layout.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::archive::{ArchiveUnbundleOptions, unbundle_archive_with, write_archive};
use offload_format::bundle::TEXT_TYPES;
use offload_format::bundle::{
    BUNDLE_MAGIC, BundleEntryId, binary_layout, check_bundle_targets, host_objcopy_args,
    objcopy_args, parse_object_bundle, parse_text_bundle,
};
use offload_format::ccob::{CCOB_MAGIC, CompressOptions};
use offload_format::ccob_stream::{CcobWriter, StreamOptions, decompress_stream};

use super::error::{FormatAt, IoAt, OpsError, Result};
use super::files::{AtomicOutput, MappedInput, open_input};

/// How a file type is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Text with comment markers (the marker given).
    Text(&'static str),
    /// The binary layout.
    Binary,
    /// The object layout when the host input is an object file, else binary.
    Object,
    /// A heterogeneous device archive.
    Archive,
}

/// The layout the bundler uses for `file_type`.
pub fn layout_of(file_type: &str) -> Result<Layout> {
    if let Some((_, c)) = TEXT_TYPES.iter().find(|(t, _)| *t == file_type) {
        return Ok(Layout::Text(c));
    }
    match file_type {
        "o" => Ok(Layout::Object),
        "a" => Ok(Layout::Archive),
        "bc" | "gch" | "ast" => Ok(Layout::Binary),
        _ => Err(OpsError::UnknownFileType {
            file_type: file_type.to_owned(),
        }),
    }
}

/// The options of `clang-offload-bundler`, one field per option.
#[derive(Debug, Clone)]
pub struct BundleConfig {
    /// `-type=`.
    pub file_type: String,
    /// `-targets=`, in order.
    pub targets: Vec<String>,
    /// `-input=`, in order.
    pub inputs: Vec<PathBuf>,
    /// `-output=`, in order.
    pub outputs: Vec<PathBuf>,
    /// `-bundle-align=` (default 1).
    pub bundle_align: u64,
    /// `-compress` (with `-compression-level=`): compress the bundle as one CCOB blob.
    pub compress: Option<CompressOptions>,
    /// Upper bound of zstd's window when compressing; see [`StreamOptions::max_window_log`].
    pub max_window_log: Option<u32>,
    /// zstd worker threads for large inputs; see [`StreamOptions::workers`].
    pub compression_threads: u32,
    /// `-allow-missing-bundles`.
    pub allow_missing_bundles: bool,
    /// `-check-input-archive`.
    pub check_input_archive: bool,
    /// `-hip-openmp-compatible`.
    pub hip_openmp_compatible: bool,
    /// The `llvm-objcopy` to use for the object layout (default: [`super::find_objcopy`]).
    pub objcopy: Option<PathBuf>,
    /// `-###`: print the `llvm-objcopy` command that bundles in the object layout to stderr,
    /// as clang does, instead of running it (the output is left empty, as clang leaves it).
    pub print_commands: bool,
    /// `-verbose`: report each compressed bundle written or read on stderr, as clang does.
    pub verbose: bool,
}

impl Default for BundleConfig {
    fn default() -> Self {
        BundleConfig {
            file_type: String::new(),
            targets: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            bundle_align: 1,
            compress: None,
            max_window_log: None,
            compression_threads: 0,
            allow_missing_bundles: false,
            check_input_archive: false,
            hip_openmp_compatible: false,
            objcopy: None,
            print_commands: false,
            verbose: false,
        }
    }
}

fn parse_targets(targets: &[String]) -> Result<Vec<BundleEntryId>> {
    if targets.is_empty() {
        return Err(OpsError::MissingOption {
            what: "targets",
            option: "-targets=",
        });
    }
    targets
        .iter()
        .map(|t| {
            BundleEntryId::parse(t).map_err(|source| OpsError::Target {
                id: t.clone(),
                source,
            })
        })
        .collect()
}

fn objcopy(cfg: &BundleConfig, path: &Path) -> Result<PathBuf> {
    match &cfg.objcopy {
        Some(p) => Ok(p.clone()),
        None => super::files::find_objcopy().map_err(|tried| OpsError::ObjcopyNotFound {
            path: path.to_owned(),
            tried,
        }),
    }
}

/// Whether the file at `path` is an object file (the object layout's host input): one the
/// object reader accepts, as clang asks LLVM's.
fn is_object_file(path: &Path) -> Result<bool> {
    let map = MappedInput::open(path)?;
    Ok(object::File::parse(map.bytes()).is_ok())
}

/// What goes into a bundle: each entry's ID and input file.
struct Entries {
    ids: Vec<String>,
    files: Vec<(File, u64, PathBuf)>,
}

fn write_zeros<W: Write>(w: &mut W, mut n: u64) -> io::Result<()> {
    const ZEROS: [u8; 4096] = [0; 4096];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        w.write_all(&ZEROS[..k])?;
        n -= k as u64;
    }
    Ok(())
}

/// Copies exactly `size` bytes of `file` to `w`. With `w` a plain [`File`] the standard
/// library copies inside the kernel (`copy_file_range`/`sendfile`).
fn copy_input<W: Write>(file: &File, size: u64, path: &Path, w: &mut W) -> Result<()> {
    // Large reads when the data passes through this process (compression); a plain file
    // writer still gets the kernel-side copy, which sees through the `BufReader`.
    let mut src = BufReader::with_capacity(1 << 20, file.take(size));
    let copied = io::copy(&mut src, w).at("copying", path)?;
    if copied != size {
        return Err(OpsError::Io {
            what: "reading",
            path: path.to_owned(),
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file shrank while being bundled: {copied} of {size} bytes"),
            ),
        });
    }
    Ok(())
}

impl Entries {
    fn open(ids: Vec<String>, inputs: &[PathBuf]) -> Result<Entries> {
        let files = inputs
            .iter()
            .map(|p| open_input(p).map(|(f, len)| (f, len, p.clone())))
            .collect::<Result<_>>()?;
        Ok(Entries { ids, files })
    }

    fn binary_size(&self, align: u64, out: &Path) -> Result<(Vec<u64>, u64)> {
        let pairs: Vec<(&str, u64)> = self
            .ids
            .iter()
            .zip(&self.files)
            .map(|(id, (_, len, _))| (id.as_str(), *len))
            .collect();
        binary_layout(&pairs, align).at(out)
    }

    fn write_binary<W: Write>(&self, w: &mut W, align: u64, out: &Path) -> Result<()> {
        let (offsets, _) = self.binary_size(align, out)?;
        let mut header = Vec::new();
        header.extend_from_slice(BUNDLE_MAGIC);
        header.extend_from_slice(&(self.ids.len() as u64).to_le_bytes());
        for ((id, (_, len, _)), off) in self.ids.iter().zip(&self.files).zip(&offsets) {
            header.extend_from_slice(&off.to_le_bytes());
            header.extend_from_slice(&len.to_le_bytes());
            header.extend_from_slice(&(id.len() as u64).to_le_bytes());
            header.extend_from_slice(id.as_bytes());
        }
        w.write_all(&header).at("writing", out)?;
        let mut pos = header.len() as u64;
        for ((file, len, path), off) in self.files.iter().zip(offsets) {
            write_zeros(w, off - pos).at("writing", out)?;
            copy_input(file, *len, path, w)?;
            pos = off + len;
        }
        Ok(())
    }

    fn text_size(&self, comment: &str) -> u64 {
        let markers = 2 * (comment.len() as u64 + 2) + 35 + 33;
        self.ids
            .iter()
            .zip(&self.files)
            .map(|(id, (_, len, _))| markers + 2 * id.len() as u64 + len)
            .sum()
    }

    fn write_text<W: Write>(&self, w: &mut W, comment: &str, out: &Path) -> Result<()> {
        for (id, (file, len, path)) in self.ids.iter().zip(&self.files) {
            let start = format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____START__ {id}\n");
            w.write_all(start.as_bytes()).at("writing", out)?;
            copy_input(file, *len, path, w)?;
            let end = format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____END__ {id}\n");
            w.write_all(end.as_bytes()).at("writing", out)?;
        }
        Ok(())
    }
}

/// Bundles `cfg.inputs` (one per target) into `cfg.outputs[0]`.
pub fn bundle(cfg: &BundleConfig) -> Result<()> {
    let layout = layout_of(&cfg.file_type)?;
    if layout == Layout::Archive {
        return Err(OpsError::ArchiveBundling);
    }
    let [output] = cfg.outputs.as_slice() else {
        return Err(OpsError::BundleOutputCount {
            outputs: cfg.outputs.len(),
        });
    };
    let ids = parse_targets(&cfg.targets)?;
    if cfg.inputs.len() != ids.len() {
        return Err(OpsError::BundleInputCount {
            inputs: cfg.inputs.len(),
            targets: ids.len(),
        });
    }
    check_bundle_targets(&ids).map_err(OpsError::TargetRules)?;
    let names: Vec<String> = ids.iter().map(ToString::to_string).collect();
    if layout == Layout::Object
        && let Some(host) = ids.iter().position(BundleEntryId::is_host)
        && is_object_file(&cfg.inputs[host])?
    {
        return bundle_object(cfg, &names, host, output);
    }
    let entries = Entries::open(names, &cfg.inputs)?;
    let mut out = AtomicOutput::create(output)?;
    match (layout, cfg.compress) {
        (Layout::Text(comment), None) => entries.write_text(out.file(), comment, output)?,
        (Layout::Text(comment), Some(opts)) => {
            let size = entries.text_size(comment);
            compressed(
                &mut out,
                (opts, cfg.verbose),
                (cfg.max_window_log, cfg.compression_threads),
                size,
                |w| entries.write_text(w, comment, output),
            )?;
        }
        (_, None) => entries.write_binary(out.file(), cfg.bundle_align, output)?,
        (_, Some(opts)) => {
            let (_, size) = entries.binary_size(cfg.bundle_align, output)?;
            compressed(
                &mut out,
                (opts, cfg.verbose),
                (cfg.max_window_log, cfg.compression_threads),
                size,
                |w| entries.write_binary(w, cfg.bundle_align, output),
            )?;
        }
    }
    out.commit()
}

fn compressed(
    out: &mut AtomicOutput,
    (opts, verbose): (CompressOptions, bool),
    (max_window_log, workers): (Option<u32>, u32),
    size: u64,
    body: impl FnOnce(&mut CcobWriter<BufWriter<&mut File>>) -> Result<()>,
) -> Result<()> {
    let started = std::time::Instant::now();
    let path = out.path().to_owned();
    let tuning = StreamOptions {
        pledged_size: Some(size),
        max_window_log,
        workers,
    };
    let mut w =
        CcobWriter::new(BufWriter::with_capacity(1 << 20, out.file()), opts, tuning).at(&path)?;
    body(&mut w)?;
    let (buffered, _) = w.finish().at(&path)?;
    let file = buffered
        .into_inner()
        .map_err(io::IntoInnerError::into_error)
        .at("writing", &path)?;
    if verbose {
        let len = file.seek(SeekFrom::End(0)).at("reading", &path)?;
        file.seek(SeekFrom::Start(0)).at("reading", &path)?;
        let (header, _) = offload_format::ccob_stream::read_header(&mut *file, 0, len).at(&path)?;
        super::verbose::compression(&header, opts, started.elapsed());
    }
    Ok(())
}

/// The object layout: `llvm-objcopy` adds one section per entry to the host object, the
/// host's own section holding a single zero byte. Compression does not apply, as in clang.
fn bundle_object(cfg: &BundleConfig, names: &[String], host: usize, output: &Path) -> Result<()> {
    let objcopy = objcopy(cfg, &cfg.inputs[host])?;
    let dir = output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut placeholder = tempfile::Builder::new()
        .prefix(".offload-host")
        .tempfile_in(dir)
        .at("creating a temporary file in", dir)?;
    placeholder
        .write_all(&[0])
        .at("writing", placeholder.path())?;
    let entries: Vec<(&str, &Path)> = names
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let path = if i == host {
                placeholder.path()
            } else {
                cfg.inputs[i].as_path()
            };
            (id.as_str(), path)
        })
        .collect();
    if cfg.print_commands {
        let args = objcopy_args(&entries, &cfg.inputs[host], output);
        let mut line = format!("\"{}\"", objcopy.display());
        for arg in args {
            line.push_str(&format!(" \"{}\"", arg.to_string_lossy()));
        }
        eprintln!("{line}");
        // clang has opened, so emptied, the output by then.
        return AtomicOutput::create(output)?.commit();
    }
    let out = AtomicOutput::create(output)?;
    let args = objcopy_args(&entries, &cfg.inputs[host], out.temp_path());
    offload_build::tooling::command::run(Command::new(&objcopy).args(args))?;
    out.commit()
}

/// Where one decompressed blob's contents lie in a file: offset and length.
type Segment = (u64, u64);

/// An input, decompressed into an anonymous temporary file first when it starts with a CCOB
/// blob: every blob stored back to back (zero padding between them skipped), each checked for
/// size and hash. Returns the file, its length and where each blob's contents start and how
/// long they are (the whole file when it is not compressed).
fn open_decompressed(path: &Path, verbose: bool) -> Result<(File, u64, Vec<Segment>)> {
    let (mut file, len) = open_input(path)?;
    if !has_magic(&mut file, CCOB_MAGIC, path)? {
        return Ok((file, len, vec![(0, len)]));
    }
    let map = MappedInput::new(&file, path)?;
    let bytes = map.bytes();
    let mut tmp = tempfile::tempfile().at("creating a temporary file for", path)?;
    let mut segments = Vec::new();
    {
        let mut w = BufWriter::with_capacity(1 << 20, &mut tmp);
        let mut at = 0u64;
        for blob in blob_starts(bytes) {
            let rest = &bytes[blob..];
            let started = std::time::Instant::now();
            let (h, blob_len) =
                decompress_stream(rest, &mut w, blob as u64, rest.len() as u64).at(path)?;
            if verbose {
                super::verbose::decompression(&h, blob_len, h.hash, started.elapsed());
            }
            segments.push((at, h.uncompressed_size));
            at += h.uncompressed_size;
        }
        w.flush().at("decompressing", path)?;
    }
    let len = tmp.seek(SeekFrom::End(0)).at("decompressing", path)?;
    tmp.seek(SeekFrom::Start(0)).at("decompressing", path)?;
    Ok((tmp, len, segments))
}

/// Where each CCOB blob of `bytes` starts: at 0, then after each blob (version 1 records no
/// length and runs to the end) past any zero padding. Headers are read again, and checked,
/// by whoever decompresses them.
fn blob_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let Some(skip) = bytes[pos..].iter().position(|&b| b != 0) else {
            break;
        };
        pos += skip;
        starts.push(pos);
        let total = offload_format::ccob::CcobHeader::parse(&bytes[pos..], pos as u64)
            .ok()
            .and_then(|(h, _)| h.total_size);
        match total {
            Some(t) if t > 0 => pos += t as usize,
            // Unreadable or version 1: the decompressor reports it, or takes the rest.
            _ => break,
        }
    }
    starts
}

fn read_prefix(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Where an entry's data lives.
enum Source<'a> {
    /// A range of the (possibly decompressed) input file.
    Range { offset: u64, size: u64 },
    /// Bytes of a mapped input.
    Bytes(&'a [u8]),
    /// The host entry of an object bundle: the object without its bundle sections.
    ObjectHost,
}

/// An entry found in an input bundle: its ID and where its data lives.
struct BundleEntry<'a> {
    id: String,
    source: Source<'a>,
}

fn has_magic(file: &mut File, magic: &[u8], path: &Path) -> Result<bool> {
    let mut buf = vec![0u8; magic.len()];
    let n = read_prefix(file, &mut buf).at("reading", path)?;
    file.seek(SeekFrom::Start(0)).at("reading", path)?;
    Ok(n == magic.len() && buf == magic)
}

/// The entries of every binary-layout bundle in `segments` of `file` (one segment per
/// decompressed blob), with offsets into `file`.
fn binary_entries(
    file: &mut File,
    segments: &[Segment],
    path: &Path,
) -> Result<Vec<BundleEntry<'static>>> {
    let mut found = Vec::new();
    for &(base, len) in segments {
        file.seek(SeekFrom::Start(base)).at("reading", path)?;
        let mut magic = [0u8; 24];
        let n = read_prefix(file, &mut magic).at("reading", path)?;
        if n < magic.len() || &magic != BUNDLE_MAGIC {
            continue;
        }
        file.seek(SeekFrom::Start(base)).at("reading", path)?;
        let reader = BufReader::new((&mut *file).take(len));
        let infos = offload_format::bundle::read_binary_header(reader, len).at(path)?;
        found.extend(infos.into_iter().map(|e| BundleEntry {
            id: e.id,
            source: Source::Range {
                offset: base + e.offset,
                size: e.size,
            },
        }));
    }
    file.seek(SeekFrom::Start(0)).at("reading", path)?;
    Ok(found)
}

fn object_entries<'a>(map: &'a MappedInput, path: &Path) -> Result<Vec<BundleEntry<'a>>> {
    let found = parse_object_bundle(map.bytes())
        .at(path)?
        .into_iter()
        .map(|e| {
            let source = match e.data {
                // The host's section holds one zero byte; its contents are the object.
                std::borrow::Cow::Borrowed(d) if d.len() < 2 => Source::ObjectHost,
                std::borrow::Cow::Borrowed(d) => Source::Bytes(d),
                std::borrow::Cow::Owned(_) => Source::ObjectHost,
            };
            BundleEntry { id: e.id, source }
        })
        .collect();
    Ok(found)
}

/// The IDs of a compressed binary bundle: of every blob stored back to back, each read to
/// its end so that its size and hash are checked (clang checks neither when listing) while
/// only the decompressor's window is held. `None` when the input is not a compressed binary
/// bundle.
fn list_compressed(input: &Path, verbose: bool) -> Result<Option<Vec<String>>> {
    use offload_format::ccob_stream::CcobReader;
    let (mut file, _) = open_input(input)?;
    if !has_magic(&mut file, CCOB_MAGIC, input)? {
        return Ok(None);
    }
    let map = MappedInput::new(&file, input)?;
    let bytes = map.bytes();
    let mut ids = Vec::new();
    for (i, blob) in blob_starts(bytes).into_iter().enumerate() {
        let rest = &bytes[blob..];
        let started = std::time::Instant::now();
        let mut r = CcobReader::new(rest, blob as u64, rest.len() as u64).at(input)?;
        let plain_len = r.header().uncompressed_size;
        match offload_format::bundle::read_binary_header(&mut r, plain_len) {
            Ok(infos) => ids.extend(infos.into_iter().map(|i| i.id)),
            // Not the binary layout: the caller's generic path decompresses it.
            Err(offload_format::Error::BundleBadMagic { .. }) if i == 0 => return Ok(None),
            Err(offload_format::Error::BundleBadMagic { .. }) => {}
            Err(offload_format::Error::Io(e)) => return Err(ccob_error(e, input)),
            Err(source) => {
                return Err(OpsError::Format {
                    path: input.to_owned(),
                    source,
                });
            }
        }
        io::copy(&mut r, &mut io::sink()).map_err(|e| ccob_error(e, input))?;
        if verbose {
            let h = r.header();
            let blob_len = h.total_size.unwrap_or(rest.len() as u64);
            super::verbose::decompression(h, blob_len, h.hash, started.elapsed());
        }
    }
    Ok(Some(ids))
}

/// The bundle entry IDs of `input`, in file order (clang prints them in hash order); with
/// `verbose`, each compressed bundle read is reported on stderr, as clang reports it.
pub fn list(file_type: &str, input: &Path, verbose: bool) -> Result<Vec<String>> {
    let layout = layout_of(file_type)?;
    if !matches!(layout, Layout::Text(_))
        && let Some(ids) = list_compressed(input, verbose)?
    {
        return Ok(ids);
    }
    let (mut file, _, segments) = open_decompressed(input, verbose)?;
    let ids = match layout {
        Layout::Text(_) => {
            let map = MappedInput::new(&file, input)?;
            parse_text_bundle(map.bytes(), file_type)
                .at(input)?
                .into_iter()
                .map(|e| e.id)
                .collect()
        }
        Layout::Object if !has_magic(&mut file, BUNDLE_MAGIC, input)? => {
            let map = MappedInput::new(&file, input)?;
            if object::File::parse(map.bytes()).is_err() {
                Vec::new()
            } else {
                object_entries(&map, input)?
                    .into_iter()
                    .map(|f| f.id)
                    .collect()
            }
        }
        _ => binary_entries(&mut file, &segments, input)?
            .into_iter()
            .map(|f| f.id)
            .collect(),
    };
    Ok(ids)
}

/// Unbundles `cfg.inputs[0]`: one output per target, each given the first entry (in file
/// order) whose ID is compatible with the target's (see [`BundleEntryId::is_compatible`]).
pub fn unbundle(cfg: &BundleConfig) -> Result<()> {
    let layout = layout_of(&cfg.file_type)?;
    let [input] = cfg.inputs.as_slice() else {
        return Err(OpsError::SingleInput {
            mode: "unbundling",
            inputs: cfg.inputs.len(),
        });
    };
    let requested = parse_targets(&cfg.targets)?;
    if cfg.outputs.len() != requested.len() {
        return Err(OpsError::UnbundleOutputCount {
            outputs: cfg.outputs.len(),
            targets: requested.len(),
        });
    }
    if layout == Layout::Archive {
        return unbundle_archive_file(cfg, input, &requested);
    }
    if !matches!(layout, Layout::Text(_))
        && unbundle_compressed(cfg, input, &requested)? == Streamed::Done
    {
        return Ok(());
    }
    let (mut file, len, segments) = open_decompressed(input, cfg.verbose)?;
    let map;
    let found = match layout {
        Layout::Text(_) => {
            map = MappedInput::new(&file, input)?;
            parse_text_bundle(map.bytes(), &cfg.file_type)
                .at(input)?
                .into_iter()
                .map(|e| match e.data {
                    std::borrow::Cow::Borrowed(d) => Ok(BundleEntry {
                        id: e.id,
                        source: Source::Bytes(d),
                    }),
                    std::borrow::Cow::Owned(_) => Err(OpsError::Io {
                        what: "reading",
                        path: input.clone(),
                        source: io::Error::other("text bundle entry not borrowed"),
                    }),
                })
                .collect::<Result<Vec<_>>>()?
        }
        Layout::Object if !has_magic(&mut file, BUNDLE_MAGIC, input)? => {
            map = MappedInput::new(&file, input)?;
            if object::File::parse(map.bytes()).is_err() {
                Vec::new()
            } else {
                object_entries(&map, input)?
            }
        }
        _ => binary_entries(&mut file, &segments, input)?,
    };

    let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
    let chosen = assign_entries_to_targets(&ids, &requested, cfg, input)?;
    let mut outs = Vec::with_capacity(requested.len());
    for ((target, choice), output) in requested.iter().zip(&chosen).zip(&cfg.outputs) {
        let mut out = AtomicOutput::create(output)?;
        match choice.map(|i| &found[i].source) {
            // No entry at all: the input is the host's file, as in clang.
            None if found.is_empty() && target.is_host() => {
                file.seek(SeekFrom::Start(0)).at("reading", input)?;
                copy_input(&file, len, input, out.file())?;
            }
            None => {}
            Some(Source::Range { offset, size }) => {
                file.seek(SeekFrom::Start(*offset)).at("reading", input)?;
                copy_input(&file, *size, input, out.file())?;
            }
            Some(Source::Bytes(d)) => out.file().write_all(d).at("writing", output)?,
            Some(Source::ObjectHost) => {
                let objcopy = objcopy(cfg, input)?;
                let args = host_objcopy_args(input, out.temp_path());
                offload_build::tooling::command::run(Command::new(&objcopy).args(args))?;
            }
        }
        outs.push(out);
    }
    for out in outs {
        out.commit()?;
    }
    Ok(())
}

/// Targets named as clang names them: sorted, "a", "a and b", "a, b, and c".
fn clang_target_list(mut targets: Vec<String>) -> String {
    targets.sort();
    targets.dedup();
    match targets.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
    }
}

/// Each entry, in file order, goes to the first still-waiting target it can serve. Fails
/// when a target gets nothing, unless missing bundles are allowed.
fn assign_entries_to_targets(
    ids: &[&str],
    requested: &[BundleEntryId],
    cfg: &BundleConfig,
    input: &Path,
) -> Result<Vec<Option<usize>>> {
    let mut chosen: Vec<Option<usize>> = vec![None; requested.len()];
    for (i, id) in ids.iter().enumerate() {
        let Ok(id) = BundleEntryId::parse(id) else {
            continue;
        };
        if let Some(t) = (0..requested.len()).find(|&t| {
            chosen[t].is_none() && id.is_compatible(&requested[t], cfg.hip_openmp_compatible)
        }) {
            chosen[t] = Some(i);
        }
    }
    let missing: Vec<String> = requested
        .iter()
        .zip(&chosen)
        .filter(|(_, c)| c.is_none())
        .map(|(t, _)| t.to_string())
        .collect();
    if !cfg.allow_missing_bundles && !missing.is_empty() {
        return Err(OpsError::MissingBundle {
            path: input.to_owned(),
            targets: clang_target_list(missing),
            note: if ids.is_empty() {
                " (the input holds no bundle entries)"
            } else {
                ""
            },
        });
    }
    Ok(chosen)
}

#[derive(Debug, PartialEq, Eq)]
enum Streamed {
    Done,
    /// Not a compressed binary bundle whose wanted entries can be read in one pass.
    NotApplicable,
}

fn ccob_error(e: io::Error, input: &Path) -> OpsError {
    match offload_format::ccob_stream::into_format_error(e) {
        offload_format::Error::Io(source) => OpsError::Io {
            what: "decompressing",
            path: input.to_owned(),
            source,
        },
        source => OpsError::Format {
            path: input.to_owned(),
            source,
        },
    }
}

/// Unbundles a compressed binary bundle in one pass over the decompressed stream, writing
/// each wanted entry's data straight to its output: nothing is held or staged on disk but
/// the decompressor's window. The size and hash are checked by reading to the end.
fn unbundle_compressed(
    cfg: &BundleConfig,
    input: &Path,
    requested: &[BundleEntryId],
) -> Result<Streamed> {
    use offload_format::ccob_stream::CcobReader;
    let (mut file, len) = open_input(input)?;
    if !has_magic(&mut file, CCOB_MAGIC, input)? {
        return Ok(Streamed::NotApplicable);
    }
    // Several blobs back to back: each has its own entries, read through a temporary file.
    if blob_starts(MappedInput::new(&file, input)?.bytes()).len() > 1 {
        return Ok(Streamed::NotApplicable);
    }
    let started = std::time::Instant::now();
    let mut r = CcobReader::new(BufReader::with_capacity(1 << 20, file), 0, len).at(input)?;
    let plain_len = r.header().uncompressed_size;
    let size_field = offload_format::ccob::CcobHeader::uncompressed_size_offset(r.header().version);
    let infos = match offload_format::bundle::read_binary_header(&mut r, plain_len) {
        Ok(infos) => infos,
        Err(offload_format::Error::BundleBadMagic { .. }) => return Ok(Streamed::NotApplicable),
        Err(offload_format::Error::Io(e)) => return Err(ccob_error(e, input)),
        Err(source) => {
            return Err(OpsError::Format {
                path: input.to_owned(),
                source,
            });
        }
    };
    if infos.is_empty() {
        return Ok(Streamed::NotApplicable);
    }
    let mut pos = 32 + infos.iter().map(|i| 24 + i.id.len() as u64).sum::<u64>();
    let ids: Vec<&str> = infos.iter().map(|i| i.id.as_str()).collect();
    let chosen = assign_entries_to_targets(&ids, requested, cfg, input)?;
    let mut order: Vec<(usize, usize)> = chosen
        .iter()
        .enumerate()
        .filter_map(|(t, c)| c.map(|i| (t, i)))
        .collect();
    order.sort_by_key(|&(_, i)| infos[i].offset);
    let mut end = pos;
    for &(_, i) in &order {
        if infos[i].size > 0 && infos[i].offset < end {
            return Ok(Streamed::NotApplicable);
        }
        end = end.max(infos[i].offset + infos[i].size);
    }
    let mut outs: Vec<Option<AtomicOutput>> = Vec::with_capacity(cfg.outputs.len());
    for output in &cfg.outputs {
        outs.push(Some(AtomicOutput::create(output)?));
    }
    let skip = |r: &mut CcobReader<_>, n: u64| -> Result<()> {
        let skipped =
            io::copy(&mut (&mut *r).take(n), &mut io::sink()).map_err(|e| ccob_error(e, input))?;
        if skipped != n {
            return Err(OpsError::Format {
                path: input.to_owned(),
                source: offload_format::Error::CcobSizeMismatch {
                    offset: size_field,
                    expected: plain_len,
                    actual: plain_len - (n - skipped),
                },
            });
        }
        Ok(())
    };
    for (t, i) in order {
        let info = &infos[i];
        if info.size == 0 {
            continue;
        }
        skip(&mut r, info.offset - pos)?;
        let out = outs[t].as_mut().ok_or_else(|| OpsError::Io {
            what: "writing",
            path: cfg.outputs[t].clone(),
            source: io::Error::other("output written twice"),
        })?;
        let path = out.path().to_owned();
        let mut w = BufWriter::with_capacity(1 << 20, out.file());
        let copied =
            io::copy(&mut (&mut r).take(info.size), &mut w).map_err(|e| ccob_error(e, input))?;
        w.flush().at("writing", &path)?;
        if copied != info.size {
            skip(&mut r, info.size - copied)?;
        }
        pos = info.offset + info.size;
    }
    // Read to the end: the size and hash are checked there.
    io::copy(&mut r, &mut io::sink()).map_err(|e| ccob_error(e, input))?;
    if cfg.verbose {
        let h = r.header();
        let blob_len = h.total_size.unwrap_or(len);
        super::verbose::decompression(h, blob_len, h.hash, started.elapsed());
    }
    for out in outs.into_iter().flatten() {
        out.commit()?;
    }
    Ok(Streamed::Done)
}

/// An error of this crate inside a format-level operation.
fn other(e: OpsError) -> offload_format::Error {
    offload_format::Error::Io(io::Error::other(e.to_string()))
}

/// The host object of a fat object: `object` without its `__CLANG_OFFLOAD_BUNDLE__` sections,
/// by the `llvm-objcopy` command clang runs.
fn strip_bundle_sections(objcopy: &Path, object: &[u8]) -> Result<Vec<u8>> {
    let dir = tempfile::tempdir().at("creating a temporary directory in", &std::env::temp_dir())?;
    let (fat, host) = (dir.path().join("fat.o"), dir.path().join("host.o"));
    std::fs::write(&fat, object).at("writing", &fat)?;
    offload_build::tooling::command::run(
        Command::new(objcopy).args(host_objcopy_args(&fat, &host)),
    )?;
    std::fs::read(&host).at("reading", &host)
}

fn unbundle_archive_file(
    cfg: &BundleConfig,
    input: &Path,
    requested: &[BundleEntryId],
) -> Result<()> {
    let map = MappedInput::open(input)?;
    let opts = ArchiveUnbundleOptions {
        allow_missing_bundles: cfg.allow_missing_bundles,
        check_input_archive: cfg.check_input_archive,
        hip_openmp_compatible: cfg.hip_openmp_compatible,
    };
    // Made only when a host entry of a fat object is asked for.
    let mut objcopy_path = None;
    let mut host_object = |member: &[u8]| -> offload_format::Result<Vec<u8>> {
        let objcopy = match &objcopy_path {
            Some(p) => p,
            None => objcopy_path.insert(objcopy(cfg, input).map_err(other)?),
        };
        strip_bundle_sections(objcopy, member).map_err(other)
    };
    let archives =
        unbundle_archive_with(map.bytes(), requested, opts, &mut host_object).at(input)?;
    let mut outs = Vec::with_capacity(archives.len());
    for (members, output) in archives.iter().zip(&cfg.outputs) {
        let mut out = AtomicOutput::create(output)?;
        {
            let mut w = BufWriter::new(out.file());
            write_archive(&mut w, members).at(output)?;
            w.flush().at("writing", output)?;
        }
        outs.push(out);
    }
    for out in outs {
        out.commit()?;
    }
    Ok(())
}

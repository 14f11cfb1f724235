//! `llvm-offload-binary`'s two directions: pack images into OffloadBinaries
//! (`--image=file=..,triple=..,arch=..,kind=..`), and extract images from a file holding
//! them (a bare OffloadBinary sequence, an object or executable with `.llvm.offloading`
//! sections, or an archive of those).

use std::borrow::Cow;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use offload_format::aligned::ObjectBytes;
use offload_format::archive::{AR_MAGIC, ArchiveMember, parse_archive, write_archive};
use offload_format::{ImageKind, OFFLOAD_BINARY_MAGIC, OffloadBinary, OffloadKind, llvm_key_order};

use super::error::{FormatAt, IoAt, OpsError, Result};
use super::files::{AtomicOutput, MappedInput, open_input};

/// One `--image=key=value,...` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpec {
    /// The argument as written.
    pub spec: String,
    /// Its pairs in order of first appearance; the values of a repeated key are joined with
    /// commas, as `llvm-offload-binary` does (`feature=+a,feature=+b` → `+a,+b`).
    pub args: Vec<(String, String)>,
}

impl ImageSpec {
    /// Parses `key=value` pairs separated by commas, as `llvm-offload-binary` does: a part
    /// without `=` is a key with an empty value, an empty part the empty key.
    pub fn parse(spec: &str) -> Result<ImageSpec> {
        let mut args: Vec<(String, String)> = Vec::new();
        for part in spec.split(',') {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            match args.iter_mut().find(|(key, _)| key == k) {
                Some((_, value)) => {
                    value.push(',');
                    value.push_str(v);
                }
                None => args.push((k.to_owned(), v.to_owned())),
            }
        }
        Ok(ImageSpec {
            spec: spec.to_owned(),
            args,
        })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn require(&self, key: &str) -> Result<&str> {
        self.get(key).ok_or_else(|| OpsError::BadImageSpec {
            spec: self.spec.clone(),
            // `llvm-offload-binary`'s words, which scripts match.
            reason: format!("'{key}' is a required image arguments"),
        })
    }

    /// Whether `bin` matches every key but `file` (`kind` by offload kind; a missing string
    /// reads as empty, as in LLVM).
    pub fn matches(&self, bin: &OffloadBinary<'_>) -> bool {
        self.args.iter().all(|(k, v)| match k.as_str() {
            "file" => true,
            "kind" => bin.offload_kind == offload_kind(v),
            _ => bin.get(k).unwrap_or("") == v,
        })
    }
}

fn offload_kind(name: &str) -> OffloadKind {
    OffloadKind::from_name(name).unwrap_or(OffloadKind::None)
}

/// Packs one OffloadBinary per image, back to back, into `output`. Each image needs `file`
/// (a `triple` is what runtimes select by, but `llvm-offload-binary` packs images without
/// one, and so does this); `kind` sets the offload kind; every other key becomes a string
/// entry, in the order `llvm-offload-binary` stores them. Images are streamed from their files.
pub fn pack(images: &[ImageSpec], output: &Path) -> Result<()> {
    let mut out = AtomicOutput::create(output)?;
    for spec in images {
        let files = spec.require("file")?;
        let kind = spec.get("kind").map_or(OffloadKind::None, offload_kind);
        let keys: Vec<&str> = spec.args.iter().map(|(k, _)| k.as_str()).collect();
        let order = llvm_key_order(&keys);
        // A repeated `file` (joined with commas) packs one binary per file.
        for file in files.split(',') {
            let path = PathBuf::from(file);
            let (file, size) = open_input(&path)?;
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            // As the tool: bitcode by its magic (clang names LTO bitcode `.o`), else by name.
            let image_kind = if starts_with_bitcode_magic(&file, &path)? {
                ImageKind::Bitcode
            } else {
                ImageKind::from_extension(ext)
            };
            let mut bin = OffloadBinary::new(image_kind, kind, Cow::Borrowed(&[][..]));
            for key in &order {
                bin = bin.with_string(*key, spec.get(key).unwrap_or(""));
            }
            bin.write_streaming(&file, size, out.file()).at(&path)?;
        }
    }
    out.commit()
}

fn starts_with_bitcode_magic(file: &std::fs::File, path: &Path) -> Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut magic = [0u8; 4];
    let mut r = file;
    let n = r.read(&mut magic).at("reading", path)?;
    r.seek(SeekFrom::Start(0)).at("reading", path)?;
    Ok(n == 4 && (magic == *b"BC\xc0\xde" || magic == [0xde, 0xc0, 0x17, 0x0b]))
}

/// What [`extract`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractReport {
    /// Files written, in order.
    pub written: Vec<PathBuf>,
    /// Things `llvm-offload-binary` warns about (several images for one `file=`).
    pub warnings: Vec<String>,
}

/// An image found in the input, with the name of the file it came from: the input's, or the
/// archive member's (what `llvm-offload-binary --archive` names its members after).
struct Found<'a> {
    source: String,
    binary: OffloadBinary<'a>,
}

impl Found<'_> {
    fn into_owned(self) -> Found<'static> {
        Found {
            source: self.source,
            binary: self.binary.into_owned(),
        }
    }
}

/// The images of `bytes` (an OffloadBinary, an object file, or an archive of those), found in
/// `path`, named `source`.
fn collect<'a>(bytes: &'a [u8], out: &mut Vec<Found<'a>>, path: &Path, source: &str) -> Result<()> {
    let found = |binary| Found {
        source: source.to_owned(),
        binary,
    };
    if bytes.starts_with(&OFFLOAD_BINARY_MAGIC) {
        let binaries =
            offload_format::parse_all(bytes).map_err(|source| OpsError::BadOffloadBinary {
                path: path.to_owned(),
                source,
            })?;
        out.extend(binaries.into_iter().map(found));
    } else if bytes.starts_with(AR_MAGIC) {
        for m in parse_archive(bytes).at(path)? {
            // Named as linkers name a member: `lib.a(member.o)`.
            let member = PathBuf::from(format!("{}({})", path.display(), m.name));
            match m.data {
                Cow::Borrowed(d) => collect(d, out, &member, &m.name)?,
                Cow::Owned(d) => {
                    let mut owned = Vec::new();
                    collect(&d, &mut owned, &member, &m.name)?;
                    out.extend(owned.into_iter().map(|f| f.into_owned()));
                }
            }
        }
    } else {
        match offload_format::aligned::object_bytes(bytes) {
            ObjectBytes::Borrowed(b) => {
                out.extend(object_images(b, path)?.into_iter().map(found));
            }
            copy @ ObjectBytes::Copied { .. } => {
                let images = object_images(&copy, path)?;
                out.extend(images.into_iter().map(|b| found(b.into_owned())));
            }
        }
    }
    Ok(())
}

/// The images in the `.llvm.offloading` sections of `bytes` when they are an object file
/// (aligned for the reader); an object file the reader refuses is an error.
fn object_images<'a>(bytes: &'a [u8], path: &Path) -> Result<Vec<OffloadBinary<'a>>> {
    let file = crate::inspect::read_object(bytes).map_err(|reason| OpsError::Unreadable {
        path: path.to_owned(),
        reason,
    })?;
    let mut out = Vec::new();
    for (name, data) in file.iter().flat_map(crate::inspect::offloading_sections) {
        out.extend(offload_format::parse_all(data).map_err(|source| {
            OpsError::BadOffloadBinary {
                path: path.join(&name),
                source,
            }
        })?);
    }
    Ok(out)
}

/// Extracts the images of `input` that match each spec. Without `archive`, each match is
/// written to the spec's `file` (the last one wins when several match, with a warning) or,
/// with no `file`, to `<input stem>-<triple>[-<arch>].<n>.<ext>` in the current directory.
/// With `archive`, the matches go into one archive at `file`, each member named after the file
/// it came from (the input, or the archive member that held it).
pub fn extract(input: &Path, images: &[ImageSpec], archive: bool) -> Result<ExtractReport> {
    let map = MappedInput::open(input)?;
    let input_name = input
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut found = Vec::new();
    collect(map.bytes(), &mut found, input, &input_name)?;
    let mut report = ExtractReport::default();
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    for spec in images {
        let matched: Vec<&Found<'_>> = found.iter().filter(|f| spec.matches(&f.binary)).collect();
        if matched.is_empty() {
            continue;
        }
        if archive {
            let file = PathBuf::from(spec.require("file")?);
            let members: Vec<ArchiveMember<'_>> = matched
                .iter()
                .map(|f| ArchiveMember {
                    name: f.source.clone(),
                    data: Cow::Borrowed(f.binary.image.as_ref()),
                })
                .collect();
            let mut out = AtomicOutput::create(&file)?;
            {
                let mut w = BufWriter::new(out.file());
                write_archive(&mut w, &members).at(&file)?;
                w.flush().at("writing", &file)?;
            }
            out.commit()?;
            report.written.push(file);
            continue;
        }
        if let Some(file) = spec.get("file") {
            if matched.len() > 1 {
                report
                    .warnings
                    .push(format!("Multiple inputs match to a single file, '{file}'"));
            }
            if let Some(last) = matched.last() {
                write_file(Path::new(file), &last.binary.image)?;
                report.written.push(PathBuf::from(file));
            }
            continue;
        }
        for (i, b) in matched.iter().map(|f| &f.binary).enumerate() {
            let mut name = format!("{stem}-{}", b.triple().unwrap_or(""));
            if let Some(arch) = b.arch().filter(|a| !a.is_empty()) {
                name.push('-');
                name.push_str(arch);
            }
            name.push_str(&format!(".{i}.{}", b.image_kind.extension()));
            write_file(Path::new(&name), &b.image)?;
            report.written.push(PathBuf::from(name));
        }
    }
    Ok(report)
}

fn write_file(path: &Path, data: &[u8]) -> Result<()> {
    let mut out = AtomicOutput::create(path)?;
    out.file().write_all(data).at("writing", path)?;
    out.commit()
}

//! The one loader of GPU driver libraries: `dlopen` at run time, never a link-time
//! dependency, so a program with GPU images starts on machines without the driver. A missing
//! library or entry point is an error value, never a panic.

use libloading::Library;

/// Why a driver library could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// None of the candidate libraries could be opened.
    #[error("no driver library could be opened: {}", tried_list(.tried))]
    LibraryNotFound {
        /// Each name tried with the loader's message.
        tried: Vec<(String, String)>,
    },
    /// The library opened but lacks an entry point this runtime needs.
    #[error("{library} lacks `{symbol}` (driver too old?): {message}")]
    MissingSymbol {
        /// The library that was opened.
        library: String,
        /// The missing symbol.
        symbol: &'static str,
        /// The loader's message.
        message: String,
    },
}

fn tried_list(tried: &[(String, String)]) -> String {
    let each = tried.iter().map(|(name, e)| {
        if e.starts_with(name.as_str()) {
            e.clone()
        } else {
            format!("{name}: {e}")
        }
    });
    each.collect::<Vec<_>>().join("; ")
}

/// The library names to try: the path in `env_var` alone when it is set, else `defaults`.
pub(crate) fn candidate_names(env_var: &str, defaults: &[&str]) -> Vec<String> {
    match std::env::var(env_var) {
        Ok(path) if !path.is_empty() => vec![path],
        _ => defaults.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Opens the first library of `names` that loads.
///
/// # Errors
/// [`LoadError::LibraryNotFound`] listing every name tried and why it failed.
pub(crate) fn open_first(names: &[String]) -> Result<(Library, String), LoadError> {
    let mut tried = Vec::new();
    for name in names {
        // SAFETY: loading a driver library runs its initializers; the driver libraries named
        // here (libcuda, libamdhip64, or the one a user names) are designed to be dlopen-ed
        // by any process.
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok((lib, name.clone())),
            Err(e) => tried.push((name.clone(), e.to_string())),
        }
    }
    Err(LoadError::LibraryNotFound { tried })
}

/// Looks up `symbol` in `lib` as a value of type `T`.
///
/// # Safety
/// `T` must be the exact function pointer type of the C symbol `symbol`.
pub(crate) unsafe fn symbol<T: Copy>(
    lib: &Library,
    library: &str,
    symbol: &'static str,
) -> Result<T, LoadError> {
    // SAFETY: the caller guarantees that `T` is the symbol's type; the value is copied out
    // and stays valid while `lib` is loaded, which the callers ensure by keeping `lib` in the
    // same table as the pointers.
    unsafe { lib.get::<T>(symbol.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| LoadError::MissingSymbol {
            library: library.to_owned(),
            symbol,
            message: e.to_string(),
        })
}

/// Declares a table of C entry points loaded from one library: `$table::load(names)` opens
/// the first library of `names` and looks up every entry point, or says which is missing;
/// the entries after `@optional` are `None` where the library lacks them (newer calls).
/// Each entry's type must be the C prototype of the symbol of the same name in the driver's
/// header (`cuda.h`, `hip_runtime_api.h`).
macro_rules! entry_points {
    ($(#[$meta:meta])* $table:ident {
        $( $name:ident : fn($($arg:ty),* $(,)?) -> $ret:ty ;)*
        @optional $( $opt:ident : fn($($oarg:ty),* $(,)?) -> $oret:ty ;)*
    }) => {
        $(#[$meta])*
        pub struct $table {
            /// The name the library was opened by.
            pub library: String,
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub $name: unsafe extern "C" fn($($arg),*) -> $ret,
            )*
            $(
                #[doc = concat!("`", stringify!($opt), "`, where the library has it")]
                pub $opt: Option<unsafe extern "C" fn($($oarg),*) -> $oret>,
            )*
            _lib: libloading::Library,
        }

        impl $table {
            /// Loads every entry point from the first library of `names` that opens.
            ///
            /// # Errors
            /// [`LoadError`](crate::backend::gpu::LoadError) naming the libraries tried or
            /// the first missing symbol.
            pub fn load(names: &[String]) -> Result<Self, $crate::backend::gpu::LoadError> {
                let (lib, library) = $crate::backend::gpu::library::open_first(names)?;
                Ok(Self {
                    $(
                        // SAFETY: the field's type is the C prototype of the symbol of the
                        // same name in the driver's header (the macro's contract).
                        $name: unsafe {
                            $crate::backend::gpu::library::symbol(&lib, &library, stringify!($name))?
                        },
                    )*
                    $(
                        // SAFETY: as above.
                        $opt: unsafe {
                            $crate::backend::gpu::library::symbol(&lib, &library, stringify!($opt))
                        }
                        .ok(),
                    )*
                    library,
                    _lib: lib,
                })
            }
        }

        impl std::fmt::Debug for $table {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($table))
                    .field("library", &self.library)
                    .finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use entry_points;

#[cfg(test)]
mod tests {
    use super::LoadError;
    use crate::backend::{cuda, hip};

    /// Each driver's table through the one loader: what it reports when the library is not
    /// there, and when the library opened lacks the driver's first entry point.
    #[test]
    fn driver_tables_name_what_they_could_not_load() {
        let missing = [
            "libdoes-not-exist-offload.so.1".to_owned(),
            "/nonexistent/libdriver.so".to_owned(),
        ];
        // libc opens everywhere and has no driver entry points.
        let libc = ["libc.so.6".to_owned()];
        let not_found = [
            cuda::sys::DriverApi::load(&missing).err(),
            hip::sys::HipApi::load(&missing).err(),
        ];
        for err in not_found {
            let msg = err.expect("no such library").to_string();
            for name in &missing {
                assert!(msg.contains(name.as_str()), "{msg}");
            }
        }
        let without_symbols = [
            (cuda::sys::DriverApi::load(&libc).err(), "cuInit"),
            (hip::sys::HipApi::load(&libc).err(), "hipInit"),
        ];
        for (err, first) in without_symbols {
            let err = err.expect("libc has no driver entry points");
            assert!(
                matches!(err, LoadError::MissingSymbol { symbol, .. } if symbol == first),
                "{err}"
            );
        }
    }
}

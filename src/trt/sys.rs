//! The operating-system calls under TensorRT's loading that the compiler cannot check, behind
//! safe functions: opening its libraries, reading their version symbols, and mapping a model
//! file into memory.

use libloading::Library;
use memmap2::Mmap;
use std::ffi::OsStr;

/// Opens a library for the life of the process (the caller leaks the handle).
pub(super) fn open_library(name: &OsStr) -> Option<Library> {
    // SAFETY: loading a TensorRT library runs only its static initialisers, which have no
    // preconditions; the caller leaks the handle so the library stays loaded.
    unsafe { Library::new(name) }.ok()
}

/// The version symbols trtkit reads: each declared `int32_t f() noexcept` in NvInferRuntime.h /
/// NvOnnxParser.h of TensorRT 8–11 and TensorRT-RTX 1.x.
const VERSION_SYMBOLS: &[&[u8]] = &[
    b"getInferLibVersion\0",
    b"getInferLibMajorVersion\0",
    b"getInferLibMinorVersion\0",
    b"getInferLibPatchVersion\0",
    b"getInferLibBuildVersion\0",
    b"getNvOnnxParserVersion\0",
];

/// Calls the version symbol `symbol` of `lib`, when the library has it; `None` too for a name
/// that is not one of TensorRT's version symbols.
pub(super) fn read_version_symbol(lib: &Library, symbol: &[u8]) -> Option<i32> {
    if !VERSION_SYMBOLS.contains(&symbol) {
        return None;
    }
    // SAFETY: `symbol` is one of VERSION_SYMBOLS, each declared `int32_t f() noexcept`; it
    // takes no arguments.
    unsafe {
        lib.get::<unsafe extern "C" fn() -> i32>(symbol)
            .ok()
            .map(|f| f())
    }
}

/// Maps `file` read-only into memory.
pub(super) fn map_read_only(file: &std::fs::File) -> std::io::Result<Mmap> {
    // SAFETY: the map is read-only and private to this process, and lives as long as the
    // bytes are used (the caller keeps it). Another process truncating or rewriting the file
    // while the build runs would change or fault the mapped pages; trtkit never writes the
    // model it is building from, and the SHA-256 taken from these same bytes is what the
    // engine's key records.
    unsafe { Mmap::map(file) }
}

//! The kernel side's hooks as the module defines them, the calls of a body, and reasons
//! named with the source line they are about.

use offload_format::abi;

use super::super::ir::{Call, Function, Instruction, Module};

/// The kernel side's hooks (`CPU_IR_*`), as the module defines them.
#[derive(Clone, Copy)]
pub(super) struct Hooks<'m> {
    pub(super) index: Option<Function<'m>>,
    pub(super) barrier: Option<Function<'m>>,
    pub(super) warp_barrier: Option<Function<'m>>,
    pub(super) enter: Option<Function<'m>>,
    pub(super) begin_block: Option<Function<'m>>,
    pub(super) set_thread: Option<Function<'m>>,
    pub(super) lanes: Option<Function<'m>>,
    pub(super) shared_slot: Option<Function<'m>>,
    pub(super) generic_shared_tile: Option<Function<'m>>,
    pub(super) interleaved: Option<Function<'m>>,
    pub(super) interleave: Option<Function<'m>>,
    pub(super) warp_turn: Option<Function<'m>>,
}

/// The hooks a formed kernel calls, all present.
pub(super) struct Complete<'m> {
    pub(super) index: Function<'m>,
    pub(super) barrier: Option<Function<'m>>,
    pub(super) warp_barrier: Option<Function<'m>>,
    pub(super) enter: Function<'m>,
    pub(super) begin_block: Function<'m>,
    pub(super) set_thread: Function<'m>,
    pub(super) lanes: Function<'m>,
    pub(super) shared: [Option<Function<'m>>; 2],
    pub(super) interleave: Option<Function<'m>>,
}

impl<'m> Complete<'m> {
    /// Whether `f` is one of the hooks (which read no index state a region must set first).
    pub(super) fn is_hook(&self, f: Function<'m>) -> bool {
        f == self.index
            || f == self.enter
            || f == self.begin_block
            || f == self.set_thread
            || f == self.lanes
            || self.shared.contains(&Some(f))
            || Some(f) == self.barrier
            || Some(f) == self.warp_barrier
            || Some(f) == self.interleave
    }

    /// Whether a call of `f` gives memory only the block's OS thread reaches: a shared array
    /// (a shared-slot hook) or a thread-local of the image (`llvm.threadlocal.address`).
    pub(super) fn gives_block_memory(&self, f: Function<'m>) -> bool {
        self.shared.contains(&Some(f)) || f.name() == b"llvm.threadlocal.address.p0"
    }

    /// Whether `i` is a place every thread of the block reaches before any goes on: a call of
    /// the block barrier, or the top of an interleaved loop's trip ([`Complete::is_barrier`]
    /// less the warp barrier, which only a warp's lanes wait at).
    pub(super) fn is_block_barrier(&self, i: Instruction<'m>) -> bool {
        let warp = self.warp_barrier.is_some()
            && i.as_value().as_call().and_then(callee) == self.warp_barrier;
        self.is_barrier(i) && !warp
    }

    /// Whether `i` calls a barrier, or the top of an interleaved loop's trip (a place regions
    /// are cut at as at a block barrier).
    pub(super) fn is_barrier(&self, i: Instruction<'m>) -> bool {
        i.as_value().as_call().and_then(callee).is_some_and(|f| {
            Some(f) == self.barrier || Some(f) == self.warp_barrier || Some(f) == self.interleave
        })
    }
}

impl<'m> Hooks<'m> {
    pub(super) fn find(module: Module<'m>) -> Hooks<'m> {
        let defined = |name: &str| module.function(name).filter(|f| !f.is_declaration());
        Hooks {
            index: defined(abi::CPU_IR_INDEX),
            barrier: defined(abi::CPU_IR_BARRIER),
            warp_barrier: defined(abi::CPU_IR_WARP_BARRIER),
            enter: defined(abi::CPU_IR_ENTER),
            begin_block: defined(abi::CPU_IR_BEGIN_BLOCK),
            set_thread: defined(abi::CPU_IR_SET_THREAD),
            lanes: defined(abi::CPU_IR_LANES),
            shared_slot: defined(abi::CPU_IR_SHARED_SLOT),
            generic_shared_tile: defined(abi::CPU_IR_GENERIC_SHARED_TILE),
            interleaved: defined(abi::CPU_IR_INTERLEAVED),
            interleave: defined(abi::CPU_IR_INTERLEAVE),
            warp_turn: defined(abi::CPU_IR_WARP_TURN),
        }
    }

    pub(super) fn barriers(&self) -> Vec<Function<'m>> {
        [self.barrier, self.warp_barrier]
            .into_iter()
            .flatten()
            .collect()
    }

    pub(super) fn complete(&self) -> std::result::Result<Complete<'m>, String> {
        let missing = |what: &str| {
            format!("the image's kernel side has no `{what}` (an offload-rt of another version)")
        };
        Ok(Complete {
            index: self.index.ok_or_else(|| missing(abi::CPU_IR_INDEX))?,
            barrier: self.barrier,
            warp_barrier: self.warp_barrier,
            enter: self.enter.ok_or_else(|| missing(abi::CPU_IR_ENTER))?,
            begin_block: self
                .begin_block
                .ok_or_else(|| missing(abi::CPU_IR_BEGIN_BLOCK))?,
            set_thread: self
                .set_thread
                .ok_or_else(|| missing(abi::CPU_IR_SET_THREAD))?,
            lanes: self.lanes.ok_or_else(|| missing(abi::CPU_IR_LANES))?,
            shared: [self.shared_slot, self.generic_shared_tile],
            interleave: self.interleave,
        })
    }
}

/// The function a call calls directly, if any.
pub(super) fn callee<'m>(call: Call<'m>) -> Option<Function<'m>> {
    call.called_function()
}

/// The calls of `function`.
pub(super) fn calls<'m>(function: Function<'m>) -> impl Iterator<Item = Call<'m>> {
    function
        .blocks()
        .flat_map(|b| b.instructions())
        .filter_map(|i| i.as_call())
}

/// The calls of a barrier hook in `function`.
pub(super) fn barrier_calls<'m>(function: Function<'m>, hooks: &Hooks<'m>) -> Vec<Call<'m>> {
    let barriers = hooks.barriers();
    calls(function)
        .filter(|c| callee(*c).is_some_and(|f| barriers.contains(&f)))
        .collect()
}

pub(super) fn name_of(function: Function<'_>) -> String {
    String::from_utf8_lossy(function.name()).into_owned()
}

/// Whether `i` is a call of the index hook.
pub(super) fn is_index_call<'m>(i: Instruction<'m>, hooks: &Complete<'m>) -> bool {
    i.as_value()
        .as_call()
        .and_then(callee)
        .is_some_and(|f| f == hooks.index)
}

/// Which index a call of the index hook asks for.
pub(super) fn index_of(call: Instruction<'_>) -> std::result::Result<u64, String> {
    call.as_value()
        .as_call()
        .and_then(|c| c.arg(0))
        .and_then(|a| a.const_zext_value())
        .ok_or_else(|| with_location("the index hook called with a variable", call))
}

/// `reason`, with the source line of `at` where debug information has one.
pub(super) fn with_location(reason: &str, at: Instruction<'_>) -> String {
    match at.debug_location().map(|l| l.file_and_line()) {
        Some((file, line)) if !file.is_empty() => format!("{reason} ({file}:{line})"),
        _ => reason.to_owned(),
    }
}

/// A Rust symbol's readable form, without its hash.
pub(super) fn demangled(symbol: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(symbol))
}

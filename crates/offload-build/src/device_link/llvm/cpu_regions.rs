//! The CPU device's barriers in IR form. A kernel's body function
//! (`offload_format::abi::CPU_BODY_PREFIX<kernel>`: one GPU thread, its parameters read) has
//! everything that reaches a barrier inlined into it, whatever the source looked like (generic
//! helpers, closures, `?`, shared arrays in helpers), and becomes the kernel's
//! `CPU_IR_REGIONS_PREFIX<kernel>` entry point: the body cut at its barriers into segments, each
//! region (the segments reachable from the kernel's start or from one barrier without crossing
//! another) cloned into a loop over the block's threads, `x` innermost, with the thread's index
//! the loop's counters.
//!
//! Between regions each thread's place is a state (the barrier it waits at, or done), kept per
//! thread, so that threads that return early, or wait at different barriers, run as a GPU runs
//! them: a warp operation's barrier first (its lanes all reached it), then, once every live
//! thread waits at a block barrier, each of those barriers' threads in turn. When every live
//! thread waits at the same barrier (the common case) the region's loop runs without a test.
//!
//! Values live across a barrier are kept per thread, in the OS thread's lane storage
//! (`CPU_IR_LANES`); values every thread computes alike (from the parameters, the block's
//! indices, shared arrays' addresses) are computed once per block instead, before the loops,
//! and values every thread holds alike at each barrier (loop counters around barriers:
//! `cpu_uniform`) are kept once per block.
//! Locals whose memory lives across a barrier get a copy per thread there too.
//!
//! A kernel the form cannot take (a barrier reached through recursion, an `invoke`) keeps one
//! coroutine per GPU thread and gets a `CPU_NOTE_PREFIX<kernel>` note saying why, with the
//! barrier's source line where debug information has one, which the build reports.
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use inkwell::IntPredicate;
use inkwell::module::Linkage;
use inkwell::values::InstructionOpcode;
use offload_format::abi;

use super::cpu_uniform::{block_uniform_slots, is_division, is_pure};
use super::ir::{
    AtomicRmwOp, AttributeIndex, Block, Builder, Call, Function, Instruction, Module, Type, Value,
};
use crate::device_link::{LinkError, Result};

/// A kernel with barriers that keeps one coroutine per GPU thread, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoroutineKernel {
    /// The kernel's name.
    pub kernel: String,
    /// Why, with the source line of the barrier where debug information has one.
    pub reason: String,
}

/// Forms the regions of every kernel body in `module` (the CPU image's bitcode, linked and
/// internalized) and drops the bodies; makes the index hook inline everywhere else. Returns
/// the kernels with barriers that keep their coroutines.
pub fn form_regions(module: Module<'_>) -> Result<Vec<CoroutineKernel>> {
    let hooks = Hooks::find(module);
    let bodies: Vec<(String, Function<'_>)> = module
        .functions()
        .filter(|f| !f.is_declaration())
        .filter_map(|f| {
            let name = std::str::from_utf8(f.name()).ok()?;
            let kernel = name.strip_prefix(abi::CPU_BODY_PREFIX)?;
            Some((kernel.to_owned(), f))
        })
        .collect();
    let mut kept = Vec::new();
    if !hooks.barriers().is_empty() && !bodies.is_empty() {
        let recursive = inline_what_reaches_barriers(module, &hooks)?;
        for (kernel, body) in &bodies {
            let formed = match recursive_callee(*body, &recursive) {
                Some(reason) => Err(reason),
                None if barrier_calls(*body, &hooks).is_empty() => continue,
                None => hooks
                    .complete()
                    .and_then(|hooks| form_kernel(module, &hooks, kernel, *body)),
            };
            if let Err(reason) = formed {
                let symbol = format!("{}{kernel}", abi::CPU_NOTE_PREFIX);
                module.add_constant_bytes(&symbol, reason.as_bytes());
                kept.push(CoroutineKernel {
                    kernel: kernel.clone(),
                    reason,
                });
            }
        }
    }
    for (_, body) in bodies {
        if !body.has_uses() {
            body.delete();
        }
    }
    for hook in [hooks.index, hooks.set_thread].into_iter().flatten() {
        hook.remove_enum_attribute(AttributeIndex::Function, "noinline");
        hook.add_enum_attribute(AttributeIndex::Function, "alwaysinline");
        hook.set_linkage(Linkage::Internal);
    }
    Ok(kept)
}

/// The kernel side's hooks (`CPU_IR_*`), as the module defines them.
#[derive(Clone, Copy)]
struct Hooks<'m> {
    index: Option<Function<'m>>,
    barrier: Option<Function<'m>>,
    warp_barrier: Option<Function<'m>>,
    enter: Option<Function<'m>>,
    begin_block: Option<Function<'m>>,
    set_thread: Option<Function<'m>>,
    lanes: Option<Function<'m>>,
    shared_slot: Option<Function<'m>>,
    generic_shared_tile: Option<Function<'m>>,
}

/// The hooks a formed kernel calls, all present.
struct Complete<'m> {
    index: Function<'m>,
    barrier: Option<Function<'m>>,
    warp_barrier: Option<Function<'m>>,
    enter: Function<'m>,
    begin_block: Function<'m>,
    set_thread: Function<'m>,
    lanes: Function<'m>,
    shared: [Option<Function<'m>>; 2],
}

impl<'m> Complete<'m> {
    /// Whether `f` is one of the hooks (which read no index state a region must set first).
    fn is_hook(&self, f: Function<'m>) -> bool {
        f == self.index
            || f == self.enter
            || f == self.begin_block
            || f == self.set_thread
            || f == self.lanes
            || self.shared.contains(&Some(f))
            || Some(f) == self.barrier
            || Some(f) == self.warp_barrier
    }
}

impl<'m> Hooks<'m> {
    fn find(module: Module<'m>) -> Hooks<'m> {
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
        }
    }

    fn barriers(&self) -> Vec<Function<'m>> {
        [self.barrier, self.warp_barrier]
            .into_iter()
            .flatten()
            .collect()
    }

    fn complete(&self) -> std::result::Result<Complete<'m>, String> {
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
        })
    }
}

/// The function a call calls directly, if any.
fn callee<'m>(call: Call<'m>) -> Option<Function<'m>> {
    call.called_function()
}

/// The calls of `function`.
fn calls<'m>(function: Function<'m>) -> impl Iterator<Item = Call<'m>> {
    function
        .blocks()
        .flat_map(|b| b.instructions())
        .filter_map(|i| i.as_call())
}

/// The calls of a barrier hook in `function`.
fn barrier_calls<'m>(function: Function<'m>, hooks: &Hooks<'m>) -> Vec<Call<'m>> {
    let barriers = hooks.barriers();
    calls(function)
        .filter(|c| callee(*c).is_some_and(|f| barriers.contains(&f)))
        .collect()
}

fn name_of(function: Function<'_>) -> String {
    String::from_utf8_lossy(function.name()).into_owned()
}

/// Marks every function that reaches a barrier `alwaysinline` and inlines it; returns the
/// ones that reach a barrier through recursion, which cannot be inlined, with the reason.
fn inline_what_reaches_barriers<'m>(
    module: Module<'m>,
    hooks: &Hooks<'m>,
) -> Result<HashMap<Function<'m>, String>> {
    let barriers = hooks.barriers();
    let defined: Vec<Function<'m>> = module.functions().filter(|f| !f.is_declaration()).collect();
    let callees: HashMap<Function<'m>, Vec<Function<'m>>> = defined
        .iter()
        .map(|f| (*f, calls(*f).filter_map(callee).collect()))
        .collect();
    // Reaching a barrier: a fixed point over the call graph.
    let mut reaching: HashSet<Function<'m>> = HashSet::new();
    loop {
        let before = reaching.len();
        for (f, called) in &callees {
            if !barriers.contains(f)
                && called
                    .iter()
                    .any(|c| barriers.contains(c) || reaching.contains(c))
            {
                reaching.insert(*f);
            }
        }
        if reaching.len() == before {
            break;
        }
    }
    // A function that reaches itself through functions reaching barriers.
    let mut recursive = HashMap::new();
    for f in &reaching {
        let mut stack: Vec<Function<'m>> = callees[f].clone();
        let mut seen = HashSet::new();
        while let Some(g) = stack.pop() {
            if g == *f {
                recursive.insert(
                    *f,
                    format!(
                        "`{}` reaches a barrier and calls itself (recursion cannot be inlined)",
                        demangled(&name_of(*f))
                    ),
                );
                break;
            }
            if reaching.contains(&g) && seen.insert(g) {
                stack.extend(callees.get(&g).into_iter().flatten().copied());
            }
        }
    }
    let bodies: HashSet<Function<'m>> = defined
        .iter()
        .copied()
        .filter(|f| f.name().starts_with(abi::CPU_BODY_PREFIX.as_bytes()))
        .collect();
    for f in &reaching {
        if bodies.contains(f) || recursive.contains_key(f) {
            continue;
        }
        f.remove_enum_attribute(AttributeIndex::Function, "noinline");
        f.remove_enum_attribute(AttributeIndex::Function, "optnone");
        f.add_enum_attribute(AttributeIndex::Function, "alwaysinline");
    }
    // rustc marks the calls of an `#[inline(never)]` function `noinline` too.
    for f in &defined {
        for call in calls(*f) {
            if callee(call).is_some_and(|c| reaching.contains(&c) && !recursive.contains_key(&c)) {
                call.remove_enum_attribute(AttributeIndex::Function, "noinline");
            }
        }
    }
    // The inliner deletes the internal functions it inlined everywhere: after it, the
    // functions are found again by name, never through the handles taken before. What it
    // left (recursion, or a call it refused) keeps its barriers out of reach.
    let reasons: Vec<(String, String)> = reaching
        .iter()
        .map(|f| {
            let name = name_of(*f);
            let reason = recursive.get(f).cloned().unwrap_or_else(|| {
                format!(
                    "`{}` reaches a barrier and could not be inlined",
                    demangled(&name)
                )
            });
            (name, reason)
        })
        .collect();
    let pipeline = "always-inline,function(sroa,early-cse,simplifycfg)";
    module
        .run_passes(pipeline)
        .map_err(|message| LinkError::Passes {
            pipeline: pipeline.to_owned(),
            message,
        })?;
    Ok(reasons
        .into_iter()
        .filter_map(|(name, reason)| Some((module.function(&name)?, reason)))
        .collect())
}

/// Why `body` keeps coroutines when it calls a function that reaches a barrier recursively.
fn recursive_callee<'m>(
    body: Function<'m>,
    recursive: &HashMap<Function<'m>, String>,
) -> Option<String> {
    calls(body).find_map(|c| {
        let reason = recursive.get(&callee(c)?)?;
        Some(with_location(reason, c.instruction()))
    })
}

/// `reason`, with the source line of `at` where debug information has one.
fn with_location(reason: &str, at: Instruction<'_>) -> String {
    match at.debug_location().map(|l| l.file_and_line()) {
        Some((file, line)) if !file.is_empty() => format!("{reason} ({file}:{line})"),
        _ => reason.to_owned(),
    }
}

/// A Rust symbol's readable form, without its hash.
fn demangled(symbol: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(symbol))
}

/// A piece of the body between barriers: from the start of `block` (or from the instruction
/// after a barrier) to its terminator or the next barrier.
#[derive(Clone, Copy, Debug)]
struct Segment<'m> {
    block: Block<'m>,
    /// The first instruction; `None` for the block's first.
    start: Option<Instruction<'m>>,
    /// The barrier call that ends it, if one does.
    barrier: Option<Instruction<'m>>,
}

/// The body cut at its barriers.
struct Segments<'m> {
    list: Vec<Segment<'m>>,
    of_instruction: HashMap<Instruction<'m>, usize>,
    /// The segment after each barrier call.
    after_barrier: HashMap<Instruction<'m>, usize>,
    /// Each segment's successors (after its terminator, or after its barrier).
    successors: Vec<Vec<usize>>,
}

impl<'m> Segments<'m> {
    fn of(body: Function<'m>, is_barrier: &dyn Fn(Instruction<'m>) -> bool) -> Segments<'m> {
        let mut list = Vec::new();
        let mut of_instruction = HashMap::new();
        let mut of_block = HashMap::new();
        let mut after_barrier = HashMap::new();
        for block in body.blocks() {
            of_block.insert(block, list.len());
            list.push(Segment {
                block,
                start: None,
                barrier: None,
            });
            let mut pending_after: Option<Instruction<'m>> = None;
            for i in block.instructions() {
                if let Some(barrier) = pending_after.take() {
                    after_barrier.insert(barrier, list.len());
                    list.push(Segment {
                        block,
                        start: Some(i),
                        barrier: None,
                    });
                }
                let current = list.len() - 1;
                of_instruction.insert(i, current);
                if is_barrier(i) {
                    list[current].barrier = Some(i);
                    pending_after = Some(i);
                }
            }
        }
        let successors = list
            .iter()
            .map(|s| match s.barrier {
                Some(b) => vec![after_barrier[&b]],
                None => s
                    .block
                    .terminator()
                    .map(|t| t.successors().map(|b| of_block[&b]).collect())
                    .unwrap_or_default(),
            })
            .collect();
        Segments {
            list,
            of_instruction,
            after_barrier,
            successors,
        }
    }

    /// `reach[a]` holds `b` when a path leads from segment `a` to segment `b` (`a` itself
    /// included).
    fn reachability(&self) -> Vec<Vec<bool>> {
        let n = self.list.len();
        (0..n)
            .map(|from| {
                let mut seen = vec![false; n];
                let mut stack = vec![from];
                while let Some(s) = stack.pop() {
                    if std::mem::replace(&mut seen[s], true) {
                        continue;
                    }
                    stack.extend(self.successors[s].iter().copied());
                }
                seen
            })
            .collect()
    }
}

/// What a value of the body is to the thread loops.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Each thread's own, from memory or control flow: kept in a slot where it lives across a
    /// barrier.
    Varying,
    /// Computed from the thread's indices and per-block values alone, without memory: computed
    /// again where a region uses it rather than kept.
    Recomputed,
    /// The same for every thread of a block and safe to compute before the loops: computed
    /// once per block.
    Hoistable,
}

/// The kinds of the body's values, memoized.
struct Kinds<'a, 'm> {
    hooks: &'a Complete<'m>,
    params: Value<'m>,
    memo: HashMap<Value<'m>, Kind>,
}

impl<'m> Kinds<'_, 'm> {
    fn of(&mut self, value: Value<'m>) -> Kind {
        if let Some(kind) = self.memo.get(&value) {
            return *kind;
        }
        // A cycle through phis is varying: the memo says so while the value is computed.
        self.memo.insert(value, Kind::Varying);
        let kind = self.compute(value);
        self.memo.insert(value, kind);
        kind
    }

    fn compute(&mut self, value: Value<'m>) -> Kind {
        let Some(i) = value.as_instruction() else {
            return if value.is_argument() && value != self.params {
                Kind::Varying
            } else {
                Kind::Hoistable
            };
        };
        let operands = |this: &mut Self, i: Instruction<'m>| {
            let mut kind = Kind::Hoistable;
            for op in i.instruction().as_value().operands() {
                match this.of(op) {
                    Kind::Varying => return Kind::Varying,
                    Kind::Recomputed => kind = Kind::Recomputed,
                    Kind::Hoistable => {}
                }
            }
            kind
        };
        use InstructionOpcode as Op;
        match i.opcode() {
            Op::Call => {
                let call = i.as_value().as_call().expect("a call");
                let Some(f) = callee(call) else {
                    return Kind::Varying;
                };
                if f == self.hooks.index {
                    let which = call.arg(0).and_then(|a| a.const_zext_value());
                    return match which {
                        Some(w) if w >= 3 => Kind::Hoistable,
                        Some(_) => Kind::Recomputed,
                        None => Kind::Varying,
                    };
                }
                let shared = self.hooks.shared.contains(&Some(f));
                let tls = f.name() == b"llvm.threadlocal.address.p0";
                if (shared || tls) && call.args().all(|a| a.is_constant() || !a.is_instruction()) {
                    return Kind::Hoistable;
                }
                Kind::Varying
            }
            Op::Load => {
                let pointer = i.operand(0).expect("a load's pointer");
                if i.is_volatile() || i.is_atomic() {
                    return Kind::Varying;
                }
                if self.is_parameter_memory(pointer, 2) {
                    Kind::Hoistable
                } else {
                    Kind::Varying
                }
            }
            op if is_pure(op) => operands(self, i),
            // Not computed before the loops (a division by zero the body guards against would
            // trap), but again where used: the body computed it before with the same operands.
            op if is_division(op) => match operands(self, i) {
                Kind::Varying => Kind::Varying,
                _ => Kind::Recomputed,
            },
            _ => Kind::Varying,
        }
    }

    /// Whether `pointer` points into the launch's parameters: the parameter array (`depth`
    /// 1) or a parameter's value (`depth` 2), both unchanged during the launch.
    fn is_parameter_memory(&mut self, pointer: Value<'m>, depth: u32) -> bool {
        if pointer == self.params {
            return true;
        }
        let Some(i) = pointer.as_instruction() else {
            return false;
        };
        match i.opcode() {
            InstructionOpcode::GetElementPtr => {
                let base = i.operand(0).expect("a GEP's base");
                i.as_value()
                    .operands()
                    .skip(1)
                    .all(|idx| self.of(idx) == Kind::Hoistable)
                    && self.is_parameter_memory(base, depth)
            }
            InstructionOpcode::Load if depth > 1 => {
                let inner = i.operand(0).expect("a load's pointer");
                !i.is_volatile() && self.is_parameter_memory(inner, depth - 1)
            }
            _ => false,
        }
    }
}

/// The body's slots: one per value or local that lives across a barrier (or is each thread's
/// own across segments), each in the thread's lane storage or, for a value every thread
/// computes alike, one for all.
struct Slots<'m> {
    /// Allocas of the body kept per thread: type size in bytes and alignment.
    per_thread: Vec<(Instruction<'m>, u64)>,
    /// Allocas of the body kept once (each thread's use ends before the next thread's).
    single: Vec<Instruction<'m>>,
    /// Allocas of the body that live across barriers but hold the same value in every thread
    /// at each barrier ([`block_uniform_slots`]): kept once per block.
    block: Vec<Instruction<'m>>,
}

/// Forms `kernel`'s regions from `body`; the reason it cannot, otherwise.
fn form_kernel<'m>(
    module: Module<'m>,
    hooks: &Complete<'m>,
    kernel: &str,
    body: Function<'m>,
) -> std::result::Result<(), String> {
    let params = body
        .params()
        .next()
        .map(|p| p.as_value())
        .ok_or("the body function has no parameter")?;
    let is_barrier = |i: Instruction<'m>| {
        i.as_value()
            .as_call()
            .and_then(callee)
            .is_some_and(|f| Some(f) == hooks.barrier || Some(f) == hooks.warp_barrier)
    };
    check_supported(body)?;
    let mut kinds = Kinds {
        hooks,
        params,
        memo: HashMap::new(),
    };
    demote_phis(module, body);
    let segments = Segments::of(body, &is_barrier);
    demote_across_segments(module, body, &segments, &mut kinds)?;
    let segments = Segments::of(body, &is_barrier);
    let mut slots = classify_allocas(module, body, &segments)?;
    let candidates: Vec<Instruction<'m>> = slots.per_thread.iter().map(|(a, _)| *a).collect();
    slots.block = block_uniform_slots(body, &candidates, &is_barrier, &mut |v| {
        kinds.of(v) == Kind::Hoistable
    });
    slots
        .per_thread
        .retain(|(alloca, _)| !slots.block.contains(alloca));
    let name = format!("{}{kernel}", abi::CPU_IR_REGIONS_PREFIX);
    if module.function(&name).is_some() {
        return Err(format!("`{name}` is already defined"));
    }
    let region_fn = Emitter::emit(module, hooks, body, &name, &segments, &slots, &mut kinds);
    match region_fn {
        Ok(_) => Ok(()),
        Err(e) => {
            if let Some(f) = module.function(&name) {
                f.delete();
            }
            Err(e)
        }
    }
}

/// Refuses what the form does not take.
fn check_supported(body: Function<'_>) -> std::result::Result<(), String> {
    let entry = body.entry_block().ok_or("the body has no blocks")?;
    for block in body.blocks() {
        for i in block.instructions() {
            use InstructionOpcode as Op;
            match i.opcode() {
                Op::Invoke | Op::CallBr | Op::IndirectBr | Op::Resume | Op::CatchSwitch => {
                    return Err(with_location(
                        "the body unwinds or branches indirectly after inlining",
                        i,
                    ));
                }
                Op::Alloca if block != entry => {
                    return Err(with_location("the body allocates stack dynamically", i));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Each phi of `body` made a slot: stored at the end of each predecessor, loaded where the
/// phi was.
fn demote_phis<'m>(module: Module<'m>, body: Function<'m>) {
    let entry = body.entry_block().expect("checked: the body has blocks");
    let builder = module.builder();
    let phis: Vec<Instruction<'m>> = body
        .blocks()
        .flat_map(|b| b.instructions())
        .filter(|i| i.as_value().is_phi())
        .collect();
    let mut loads = Vec::new();
    for phi in &phis {
        builder.position_at_start(entry);
        let ty = phi.as_value().ty();
        let slot = builder.build_alloca(ty, 0, c"phi.slot");
        let as_phi = phi.as_value().as_phi().expect("a phi");
        for (value, pred) in as_phi.incomings().collect::<Vec<_>>() {
            let terminator = pred.terminator().expect("a predecessor ends");
            builder.position_before(terminator.instruction());
            builder.build_store(value, slot.as_value());
        }
        loads.push((*phi, slot, ty));
    }
    for (phi, slot, ty) in loads {
        let block = phi.block();
        let first = block
            .instructions()
            .find(|i| !i.as_value().is_phi())
            .expect("a block ends with a terminator");
        builder.position_before(first);
        let load = builder.build_load(ty, slot.as_value(), c"phi.load");
        phi.as_value().replace_all_uses_with(load.as_value());
    }
    for phi in phis {
        phi.erase();
    }
}

/// Whether `i` is a call of the index hook.
fn is_index_call<'m>(i: Instruction<'m>, hooks: &Complete<'m>) -> bool {
    i.as_value()
        .as_call()
        .and_then(callee)
        .is_some_and(|f| f == hooks.index)
}

/// Each value used in another segment than its own made a slot (except the index hook's
/// calls and values computed once per block, which the loops have anyway).
fn demote_across_segments<'m>(
    module: Module<'m>,
    body: Function<'m>,
    segments: &Segments<'m>,
    kinds: &mut Kinds<'_, 'm>,
) -> std::result::Result<(), String> {
    let entry = body.entry_block().expect("checked: the body has blocks");
    let builder = module.builder();
    let instructions: Vec<Instruction<'m>> = body.blocks().flat_map(|b| b.instructions()).collect();
    for i in instructions {
        let value = i.as_value();
        if value.ty().is_void()
            || value.is_alloca()
            || is_index_call(i, kinds.hooks)
            || kinds.of(value) != Kind::Varying
        {
            continue;
        }
        let home = segments.of_instruction[&i];
        let users: Vec<Instruction<'m>> = value
            .users()
            .into_iter()
            .filter_map(|u| u.as_instruction())
            .filter(|u| segments.of_instruction.get(u) != Some(&home))
            .collect();
        if users.is_empty() {
            continue;
        }
        if i.as_terminator().is_some() {
            return Err(with_location(
                "a value defined by a block's terminator lives across a barrier",
                i,
            ));
        }
        let ty = value.ty();
        builder.position_at_start(entry);
        let slot = builder.build_alloca(ty, 0, c"live.slot");
        let next = i.next().expect("a non-terminator has a next instruction");
        builder.position_before(next);
        builder.build_store(value, slot.as_value());
        for user in users {
            builder.position_before(user);
            let load = builder.build_load(ty, slot.as_value(), c"live.load");
            user.replace_operand(value, load.as_value());
        }
    }
    Ok(())
}

/// Where the memory of each alloca of `body` goes: per thread when a barrier lies between two
/// of its accesses (or its address is stored somewhere), once otherwise.
fn classify_allocas<'m>(
    module: Module<'m>,
    body: Function<'m>,
    segments: &Segments<'m>,
) -> std::result::Result<Slots<'m>, String> {
    let reach = segments.reachability();
    let crossings: Vec<(usize, usize)> = segments
        .list
        .iter()
        .enumerate()
        .filter_map(|(s, seg)| Some((s, segments.after_barrier[&seg.barrier?])))
        .collect();
    let entry = body.entry_block().expect("checked: the body has blocks");
    let allocas: Vec<Instruction<'m>> = entry
        .instructions()
        .filter(|i| i.as_value().is_alloca())
        .collect();
    let mut slots = Slots {
        per_thread: Vec::new(),
        single: Vec::new(),
        block: Vec::new(),
    };
    for alloca in allocas {
        let (ty, align) = alloca.alloca_type().expect("an alloca");
        if align > 64 {
            return Err(with_location(
                "a local aligned to more than 64 bytes lives across a barrier",
                alloca,
            ));
        }
        let count = alloca
            .operand(0)
            .and_then(|n| n.const_zext_value())
            .ok_or_else(|| with_location("a local of a dynamic length", alloca))?;
        let bytes = module.abi_size(ty) * count;
        let (accesses, escapes) = accesses_of(alloca.as_value(), segments);
        let crosses = crossings.iter().any(|&(before, after)| {
            accesses.iter().any(|&a| reach[a][before]) && accesses.iter().any(|&b| reach[after][b])
        });
        if crosses || escapes {
            slots.per_thread.push((alloca, bytes.max(1)));
        } else {
            slots.single.push(alloca);
        }
    }
    Ok(slots)
}

/// The segments where the memory at `pointer` (an alloca) is used, and whether its address
/// escapes (is stored, or turned into an integer).
fn accesses_of<'m>(pointer: Value<'m>, segments: &Segments<'m>) -> (Vec<usize>, bool) {
    let mut accesses = Vec::new();
    let mut escapes = false;
    let mut stack = vec![pointer];
    let mut seen = HashSet::new();
    while let Some(p) = stack.pop() {
        if !seen.insert(p) {
            continue;
        }
        for user in p.users() {
            let Some(i) = user.as_instruction() else {
                escapes = true;
                continue;
            };
            if let Some(&s) = segments.of_instruction.get(&i) {
                accesses.push(s);
            }
            use InstructionOpcode as Op;
            match i.opcode() {
                Op::GetElementPtr | Op::BitCast | Op::AddrSpaceCast | Op::Select | Op::Phi => {
                    stack.push(user)
                }
                Op::Store if i.operand(0) == Some(p) => escapes = true,
                Op::PtrToInt => escapes = true,
                _ => {}
            }
        }
    }
    (accesses, escapes)
}

/// The bit a thread's state carries once it ran in a round of block barriers.
const RAN_THIS_ROUND: u64 = 1 << 31;

/// A slot of the body that every thread holds alike at each barrier: each thread of a region
/// starts from `current` in a local of its own (so that a read after the thread's own write
/// sees it) and leaves its value at a barrier in `next`, all threads the same value; the
/// scheduler makes `next` current between regions. Reads of `current` are invariant in the
/// loop over the threads, and so is what is computed from them.
#[derive(Clone, Copy)]
struct BlockSlot<'m> {
    body: Value<'m>,
    ty: Type<'m>,
    current: Value<'m>,
    next: Value<'m>,
    local: Value<'m>,
}

/// The loop counters of one thread of a region's loop.
#[derive(Clone, Copy)]
struct ThreadAt<'m> {
    xyz: [Value<'m>; 3],
    /// The thread's state.
    state: Value<'m>,
    /// `RAN_THIS_ROUND` in a round, else 0: or-ed into the states threads leave with.
    flag: Value<'m>,
    /// Where a thread goes once it reached a barrier or returned.
    latch: Block<'m>,
}

/// One region's clone for one thread, under construction.
struct RegionClone<'c, 'm> {
    at: ThreadAt<'m>,
    /// The per-thread locals' addresses for this thread.
    locals: &'c HashMap<Value<'m>, Value<'m>>,
    /// The body's values in the block being cloned: copies, and values computed again.
    values: HashMap<Value<'m>, Value<'m>>,
    /// The block being filled.
    current: Block<'m>,
}

/// Which index a call of the index hook asks for.
fn index_of(call: Instruction<'_>) -> std::result::Result<u64, String> {
    call.as_value()
        .as_call()
        .and_then(|c| c.arg(0))
        .and_then(|a| a.const_zext_value())
        .ok_or_else(|| with_location("the index hook called with a variable", call))
}

/// The region entry point under construction.
struct Emitter<'a, 'm> {
    module: Module<'m>,
    hooks: &'a Complete<'m>,
    function: Function<'m>,
    builder: Builder<'m>,
    segments: &'a Segments<'m>,
    i32_ty: Type<'m>,
    i64_ty: Type<'m>,
    /// The body's parameter array, and the entry point's.
    body_params: Value<'m>,
    params: Value<'m>,
    /// Where per-block values go: before the end of the block's start.
    hoist_point: Instruction<'m>,
    /// Per-block values: the body's values computed once per block.
    hoisted: HashMap<Value<'m>, Value<'m>>,
    /// The index hook's values per block (`which` >= 3).
    block_values: HashMap<u64, Value<'m>>,
    /// The threads of a block.
    threads: Value<'m>,
    /// The allocas kept once, as the entry point's allocas.
    single: HashMap<Value<'m>, Value<'m>>,
    /// The allocas kept per thread: each one's lanes and size.
    lanes: Vec<(Value<'m>, Value<'m>, u64)>,
    /// The threads' states (u32 each): 0 done, else the region each waits to run (1 the
    /// body's start), with [`RAN_THIS_ROUND`] in a round once run.
    states: Value<'m>,
    /// The region after each barrier call.
    region_of_barrier: HashMap<Instruction<'m>, u64>,
    /// Each region's first segment (region `r` is state `r + 1`).
    region_starts: Vec<usize>,
    /// Each region's state, where it follows a warp barrier.
    first_warp_state: Option<u64>,
    /// The slots kept once per block, each in three locals of the entry point.
    block_slots: Vec<BlockSlot<'m>>,
    debug_from: Option<Instruction<'m>>,
}

impl<'a, 'm> Emitter<'a, 'm> {
    /// Emits the entry point `name` from `body`.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        module: Module<'m>,
        hooks: &'a Complete<'m>,
        body: Function<'m>,
        name: &str,
        segments: &'a Segments<'m>,
        slots: &Slots<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Function<'m>, String> {
        let (i32_ty, i64_ty, ptr_ty) = (module.i32_type(), module.i64_type(), module.ptr_type(0));
        let fn_ty = i32_ty.function_type(&[ptr_ty, ptr_ty, i64_ty, i64_ty], false);
        let function = module.add_function(name, fn_ty);
        if let Some(sp) = body.subprogram() {
            function.set_subprogram(sp);
        }
        let debug_from = body
            .blocks()
            .flat_map(|b| b.instructions())
            .find(|i| i.debug_location().is_some());
        let args: Vec<Value<'m>> = function.params().map(|p| p.as_value()).collect();
        let (launch, params, begin, end) = (args[0], args[1], args[2], args[3]);
        let body_params = body
            .params()
            .next()
            .map(|p| p.as_value())
            .ok_or("the body function has no parameter")?;
        // Regions: the body's start, then one after each barrier, block barriers first.
        let is_warp = |i: Instruction<'m>| {
            hooks.warp_barrier.is_some()
                && i.as_value().as_call().and_then(callee) == hooks.warp_barrier
        };
        let mut region_of_barrier = HashMap::new();
        let mut region_starts = vec![0usize];
        let mut first_warp_state = None;
        for warp in [false, true] {
            for seg in &segments.list {
                let Some(b) = seg.barrier else { continue };
                if is_warp(b) != warp {
                    continue;
                }
                region_starts.push(segments.after_barrier[&b]);
                let state = region_starts.len() as u64;
                if warp && first_warp_state.is_none() {
                    first_warp_state = Some(state);
                }
                region_of_barrier.insert(b, state);
            }
        }
        let builder = module.builder();
        let entry = function.append_block(c"entry");
        builder.position_at_end(entry);
        let mut single = HashMap::new();
        for alloca in &slots.single {
            let (ty, align) = alloca.alloca_type().expect("an alloca");
            let copy = builder.build_alloca(ty, align.max(1), c"local");
            single.insert(alloca.as_value(), copy.as_value());
        }
        let block_slots = slots
            .block
            .iter()
            .map(|alloca| {
                let (ty, align) = alloca.alloca_type().expect("an alloca");
                let align = align.max(1);
                BlockSlot {
                    body: alloca.as_value(),
                    ty,
                    current: builder.build_alloca(ty, align, c"block.slot").as_value(),
                    next: builder.build_alloca(ty, align, c"block.next").as_value(),
                    local: builder.build_alloca(ty, align, c"block.local").as_value(),
                }
            })
            .collect();
        let placeholder = builder.build_unreachable();
        let mut emitter = Emitter {
            module,
            hooks,
            function,
            builder,
            segments,
            i32_ty,
            i64_ty,
            body_params,
            params,
            hoist_point: placeholder,
            hoisted: HashMap::new(),
            block_values: HashMap::new(),
            threads: params,
            single,
            lanes: Vec::new(),
            states: params,
            region_of_barrier,
            region_starts,
            first_warp_state,
            block_slots,
            debug_from,
        };
        placeholder.erase();
        emitter.emit_function(entry, [launch, begin, end], slots, kinds)?;
        Ok(function)
    }

    fn call(&self, f: Function<'m>, args: &[Value<'m>]) -> Value<'m> {
        let call = self.builder.build_call(f, args, c"");
        if let Some(from) = self.debug_from {
            call.instruction().copy_debug_location_from(from);
        }
        call.as_value()
    }

    fn const32(&self, v: u64) -> Value<'m> {
        self.i32_ty.const_int(v, false)
    }

    fn const64(&self, v: u64) -> Value<'m> {
        self.i64_ty.const_int(v, false)
    }

    fn block(&self, name: &std::ffi::CStr) -> Block<'m> {
        self.function.append_block(name)
    }

    fn byte_gep(&self, base: Value<'m>, offset: Value<'m>) -> Value<'m> {
        self.builder.build_gep_with_no_wrap_flags(
            self.module.i8_type(),
            base,
            &[offset],
            c"",
            super::ir::GepNoWrapFlags::NONE,
        )
    }

    /// Thread `rank`'s state.
    fn state_of(&self, rank: Value<'m>) -> Value<'m> {
        let b = &self.builder;
        self.byte_gep(self.states, b.build_mul(rank, self.const64(4), c""))
    }

    fn emit_function(
        &mut self,
        entry: Block<'m>,
        [launch, begin, end]: [Value<'m>; 3],
        slots: &Slots<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        self.builder.position_at_end(entry);
        let flag_slot = self
            .builder
            .build_alloca(self.i32_ty, 4, c"round.flag")
            .as_value();
        let round_state = self
            .builder
            .build_alloca(self.i32_ty, 4, c"round.state")
            .as_value();
        let round_max = self
            .builder
            .build_alloca(self.i32_ty, 4, c"round.max")
            .as_value();
        self.call(self.hooks.enter, &[launch]);
        let dims: Vec<Value<'m>> = (6..9)
            .map(|w| self.call(self.hooks.index, &[self.const32(w)]))
            .collect();
        let b = &self.builder;
        let threads32 = b.build_mul(b.build_mul(dims[0], dims[1], c""), dims[2], c"threads");
        self.threads = b.build_zext(threads32, self.i64_ty, c"");
        // Lane storage: the states, then each per-thread local, each 64-byte aligned.
        let mut offset = b.build_mul(self.threads, self.const64(4), c"");
        let mut placed = Vec::new();
        for (alloca, bytes) in &slots.per_thread {
            let b = &self.builder;
            let start = b.build_and(
                b.build_add(offset, self.const64(63), c""),
                self.const64(!63),
                c"",
            );
            placed.push((alloca.as_value(), start, *bytes));
            let size = b.build_mul(self.threads, self.const64(*bytes), c"");
            offset = b.build_add(start, size, c"");
        }
        let base = self.call(self.hooks.lanes, &[offset]);
        let b = &self.builder;
        let ptr_ty = self.module.ptr_type(0);
        let no_room = b.build_icmp(IntPredicate::EQ, base, ptr_ty.const_null(), c"");
        let refuse = self.block(c"no.room");
        let start = self.block(c"start");
        self.builder.build_cond_br(no_room, refuse, start);
        self.builder.position_at_end(refuse);
        self.builder.build_ret(self.const32(1));
        self.builder.position_at_end(start);
        self.states = base;
        for (alloca, at, bytes) in placed {
            let lanes = self.byte_gep(base, at);
            self.lanes.push((alloca, lanes, bytes));
        }
        let head = self.block(c"block.head");
        let block_start = self.block(c"block.start");
        let done = self.block(c"done");
        let next = self.block(c"block.next");
        let b = &self.builder;
        b.build_br(head);
        b.position_at_end(head);
        let linear = b.build_phi(self.i64_ty, c"block");
        linear.add_incoming(begin, start);
        let more = b.build_icmp(IntPredicate::ULT, linear.as_value(), end, c"");
        self.builder.build_cond_br(more, block_start, done);
        self.builder.position_at_end(done);
        self.builder.build_ret(self.const32(0));
        self.builder.position_at_end(next);
        let following = self
            .builder
            .build_add(linear.as_value(), self.const64(1), c"");
        linear.add_incoming(following, next);
        self.builder.build_br(head);
        // Per block: its start, its values, the body's start for every thread, then the
        // regions until every thread is done.
        self.builder.position_at_end(block_start);
        self.call(self.hooks.begin_block, &[launch, linear.as_value()]);
        self.builder.build_store(self.const32(0), flag_slot);
        let first_region = self.block(c"first.region");
        self.hoist_point = self.builder.build_br(first_region).instruction();
        self.builder.position_before(self.hoist_point);
        for w in 3..12u64 {
            let value = if (6..9).contains(&w) {
                dims[w as usize - 6]
            } else {
                self.call(self.hooks.index, &[self.const32(w)])
            };
            self.block_values.insert(w, value);
        }
        let schedule = self.block(c"schedule");
        let mut unguarded = Vec::new();
        let mut guarded = Vec::new();
        for r in 0..self.region_starts.len() {
            unguarded.push(self.region_loop(r, false, schedule, flag_slot, kinds)?);
            guarded.push(self.region_loop(r, true, schedule, flag_slot, kinds)?);
        }
        self.builder.position_at_end(first_region);
        self.builder.build_br(unguarded[0]);
        self.emit_schedule(
            schedule,
            next,
            (&unguarded, &guarded),
            [flag_slot, round_state, round_max],
        );
        Ok(())
    }

    /// Jumps on `state` to `targets[state - 1]`.
    fn switch_on(&self, state: Value<'m>, targets: &[Block<'m>]) {
        let unknown = self.block(c"unknown.state");
        let cases: Vec<(Value<'m>, Block<'m>)> = targets
            .iter()
            .enumerate()
            .map(|(r, block)| (self.const32(r as u64 + 1), *block))
            .collect();
        self.builder.build_switch(state, unknown, &cases);
        self.builder.position_at_end(unknown);
        self.builder.build_unreachable();
    }

    /// The scheduler, which every region's loop ends in: reads the threads' states and runs
    /// the next region, or ends the block.
    fn emit_schedule(
        &mut self,
        schedule: Block<'m>,
        block_done: Block<'m>,
        (unguarded, guarded): (&[Block<'m>], &[Block<'m>]),
        [flag_slot, round_state, round_max]: [Value<'m>; 3],
    ) {
        let (i32_ty, i64_ty, i1_ty) = (self.i32_ty, self.i64_ty, self.module.i1_type());
        let scan_start = self.block(c"scan.start");
        let scan = self.block(c"scan");
        let scanned = self.block(c"scanned");
        let round_step = self.block(c"round.step");
        let b = &self.builder;
        b.position_at_end(schedule);
        for slot in &self.block_slots {
            b.build_store(
                b.build_load(slot.ty, slot.next, c"").as_value(),
                slot.current,
            );
        }
        let flag = b.build_load(i32_ty, flag_slot, c"").as_value();
        let in_round = b.build_icmp(IntPredicate::NE, flag, self.const32(0), c"");
        self.builder.build_cond_br(in_round, round_step, scan_start);
        // The scan: the largest state, the smallest live one, whether a thread is done.
        self.builder.position_at_end(scan_start);
        self.builder.build_br(scan);
        let b = &self.builder;
        b.position_at_end(scan);
        let t = b.build_phi(i64_ty, c"t");
        let max = b.build_phi(i32_ty, c"max");
        let min = b.build_phi(i32_ty, c"min");
        let any_done = b.build_phi(i1_ty, c"any.done");
        t.add_incoming(self.const64(0), scan_start);
        max.add_incoming(self.const32(0), scan_start);
        min.add_incoming(self.const32(u64::from(u32::MAX)), scan_start);
        any_done.add_incoming(i1_ty.const_int(0, false), scan_start);
        let at = self.state_of(t.as_value());
        let b = &self.builder;
        let s = b.build_load(i32_ty, at, c"state").as_value();
        let is_done = b.build_icmp(IntPredicate::EQ, s, self.const32(0), c"");
        let gt = b.build_icmp(IntPredicate::UGT, s, max.as_value(), c"");
        let max_next = b.build_select(gt, s, max.as_value(), c"");
        let live = b.build_select(is_done, self.const32(u64::from(u32::MAX)), s, c"");
        let lt = b.build_icmp(IntPredicate::ULT, live, min.as_value(), c"");
        let min_next = b.build_select(lt, live, min.as_value(), c"");
        let done_next = b.build_or(any_done.as_value(), is_done, c"");
        let t_next = b.build_add(t.as_value(), self.const64(1), c"");
        t.add_incoming(t_next, scan);
        max.add_incoming(max_next, scan);
        min.add_incoming(min_next, scan);
        any_done.add_incoming(done_next, scan);
        let again = b.build_icmp(IntPredicate::ULT, t_next, self.threads, c"");
        self.builder.build_cond_br(again, scan, scanned);
        // Every thread done: the next block.
        self.builder.position_at_end(scanned);
        let b = &self.builder;
        let all_done = b.build_icmp(IntPredicate::EQ, max_next, self.const32(0), c"");
        let dispatch = self.block(c"dispatch");
        self.builder.build_cond_br(all_done, block_done, dispatch);
        // Every live thread at one barrier and none done: the region's loop, unguarded.
        self.builder.position_at_end(dispatch);
        let b = &self.builder;
        let same = b.build_icmp(IntPredicate::EQ, min_next, max_next, c"");
        let whole = b.build_and(same, b.build_not(done_next, c""), c"");
        let run_whole = self.block(c"run.whole");
        let not_whole = self.block(c"not.whole");
        self.builder.build_cond_br(whole, run_whole, not_whole);
        self.builder.position_at_end(run_whole);
        self.switch_on(max_next, unguarded);
        // Threads at a warp barrier (the largest states) go first; one state: its threads.
        self.builder.position_at_end(not_whole);
        let b = &self.builder;
        let warp = match self.first_warp_state {
            Some(first) => b.build_icmp(IntPredicate::UGE, max_next, self.const32(first), c""),
            None => i1_ty.const_int(0, false),
        };
        let one_state = b.build_or(warp, same, c"");
        let run_one = self.block(c"run.one");
        let round = self.block(c"round");
        self.builder.build_cond_br(one_state, run_one, round);
        self.builder.position_at_end(run_one);
        self.switch_on(max_next, guarded);
        // Threads at different block barriers: a round runs each barrier's threads, marking
        // them as they leave so that none runs twice, then clears the marks.
        let round_run = self.block(c"round.run");
        let round_next = self.block(c"round.next");
        let clear_start = self.block(c"round.clear");
        let b = &self.builder;
        b.position_at_end(round);
        b.build_store(self.const32(RAN_THIS_ROUND), flag_slot);
        b.build_store(min_next, round_state);
        b.build_store(max_next, round_max);
        b.build_br(round_run);
        b.position_at_end(round_step);
        let current = b.build_load(i32_ty, round_state, c"").as_value();
        let following = b.build_add(current, self.const32(1), c"");
        b.build_store(following, round_state);
        b.build_br(round_run);
        b.position_at_end(round_run);
        let state = b.build_load(i32_ty, round_state, c"").as_value();
        let last = b.build_load(i32_ty, round_max, c"").as_value();
        let past = b.build_icmp(IntPredicate::UGT, state, last, c"");
        self.builder.build_cond_br(past, clear_start, round_next);
        self.builder.position_at_end(round_next);
        // A state no thread is at runs its guarded loop for nothing; states between two
        // barriers' are rare (threads at different barriers are).
        self.switch_on(state, guarded);
        let clear = self.block(c"clear");
        let b = &self.builder;
        b.position_at_end(clear_start);
        b.build_store(self.const32(0), flag_slot);
        b.build_br(clear);
        b.position_at_end(clear);
        let t = b.build_phi(i64_ty, c"t");
        t.add_incoming(self.const64(0), clear_start);
        let at = self.state_of(t.as_value());
        let b = &self.builder;
        let s = b.build_load(i32_ty, at, c"").as_value();
        let cleared = b.build_and(s, self.const32(RAN_THIS_ROUND - 1), c"");
        b.build_store(cleared, at);
        let t_next = b.build_add(t.as_value(), self.const64(1), c"");
        t.add_incoming(t_next, clear);
        let again = b.build_icmp(IntPredicate::ULT, t_next, self.threads, c"");
        self.builder.build_cond_br(again, clear, scan_start);
    }

    /// The loop of region `r` over the block's threads (`x` innermost), those whose state is
    /// the region's only when `guarded`, ending in `after`; returns its first block.
    fn region_loop(
        &mut self,
        r: usize,
        guarded: bool,
        after: Block<'m>,
        flag_slot: Value<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Block<'m>, String> {
        let (i32_ty, i64_ty) = (self.i32_ty, self.i64_ty);
        let [bx, by, bz] = [6, 7, 8].map(|w| self.block_values[&w]);
        let pre = self.block(c"region");
        let z_head = self.block(c"z");
        let y_head = self.block(c"y");
        let x_body = self.block(c"x");
        let x_latch = self.block(c"x.latch");
        let y_latch = self.block(c"y.latch");
        let z_latch = self.block(c"z.latch");
        let b = &self.builder;
        b.position_at_end(pre);
        let flag = b.build_load(i32_ty, flag_slot, c"flag").as_value();
        b.build_br(z_head);
        b.position_at_end(z_head);
        let z = b.build_phi(i32_ty, c"z");
        z.add_incoming(self.const32(0), pre);
        b.build_br(y_head);
        b.position_at_end(y_head);
        let y = b.build_phi(i32_ty, c"y");
        y.add_incoming(self.const32(0), z_head);
        let row = b.build_mul(
            b.build_add(b.build_mul(z.as_value(), by, c""), y.as_value(), c""),
            bx,
            c"",
        );
        let row = b.build_zext(row, i64_ty, c"row");
        b.build_br(x_body);
        b.position_at_end(x_body);
        let x = b.build_phi(i32_ty, c"x");
        x.add_incoming(self.const32(0), y_head);
        let rank = b.build_add(row, b.build_zext(x.as_value(), i64_ty, c""), c"rank");
        let state = self.state_of(rank);
        let go = self.block(c"go");
        if guarded {
            let b = &self.builder;
            let s = b.build_load(i32_ty, state, c"").as_value();
            let mine = b.build_icmp(IntPredicate::EQ, s, self.const32(r as u64 + 1), c"");
            self.builder.build_cond_br(mine, go, x_latch);
        } else {
            self.builder.build_br(go);
        }
        self.builder.position_at_end(go);
        let mut locals = HashMap::new();
        for slot in &self.block_slots {
            let b = &self.builder;
            b.build_store(
                b.build_load(slot.ty, slot.current, c"").as_value(),
                slot.local,
            );
            locals.insert(slot.body, slot.local);
        }
        for (alloca, lanes, bytes) in &self.lanes {
            let offset = self.builder.build_mul(rank, self.const64(*bytes), c"");
            locals.insert(*alloca, self.byte_gep(*lanes, offset));
        }
        let at = ThreadAt {
            xyz: [x.as_value(), y.as_value(), z.as_value()],
            state,
            flag,
            latch: x_latch,
        };
        let start = self.clone_region(self.region_starts[r], &at, &locals, kinds)?;
        self.builder.position_at_end(go);
        self.builder.build_br(start);
        let b = &self.builder;
        b.position_at_end(x_latch);
        let x_next = b.build_add(x.as_value(), self.const32(1), c"");
        x.add_incoming(x_next, x_latch);
        let more_x = b.build_icmp(IntPredicate::ULT, x_next, bx, c"");
        self.builder.build_cond_br(more_x, x_body, y_latch);
        let b = &self.builder;
        b.position_at_end(y_latch);
        let y_next = b.build_add(y.as_value(), self.const32(1), c"");
        y.add_incoming(y_next, y_latch);
        let more_y = b.build_icmp(IntPredicate::ULT, y_next, by, c"");
        self.builder.build_cond_br(more_y, y_head, z_latch);
        let b = &self.builder;
        b.position_at_end(z_latch);
        let z_next = b.build_add(z.as_value(), self.const32(1), c"");
        z.add_incoming(z_next, z_latch);
        let more_z = b.build_icmp(IntPredicate::ULT, z_next, bz, c"");
        self.builder.build_cond_br(more_z, z_head, after);
        Ok(pre)
    }

    /// Clones the region starting at segment `first` for one thread: returns the clone's first
    /// block.
    fn clone_region(
        &mut self,
        first: usize,
        at: &ThreadAt<'m>,
        locals: &HashMap<Value<'m>, Value<'m>>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Block<'m>, String> {
        let mut copies: HashMap<(Block<'m>, Option<Instruction<'m>>), Block<'m>> = HashMap::new();
        let mut clone = RegionClone {
            at: *at,
            locals,
            values: HashMap::new(),
            current: self.hoist_point.block(),
        };
        let start_seg = self.segments.list[first];
        let key = (start_seg.block, start_seg.start);
        let first_block = self.block(c"r");
        copies.insert(key, first_block);
        let mut work = vec![(key, first_block)];
        while let Some(((block, start), copy)) = work.pop() {
            // A copy is one segment, whose values are its own (those used in another have
            // slots) or computed again in it.
            clone.current = copy;
            clone.values.clear();
            let mut next = match start {
                Some(i) => Some(i),
                None => block.first_instruction(),
            };
            while let Some(i) = next {
                next = i.next();
                self.builder.position_at_end(copy);
                if let Some(&state) = self.region_of_barrier.get(&i) {
                    self.leave(at, self.const32(state), true);
                    break;
                }
                use InstructionOpcode as Op;
                match i.opcode() {
                    Op::Return => {
                        self.leave(at, self.const32(0), false);
                        break;
                    }
                    Op::Alloca => continue,
                    _ => {}
                }
                let value = i.as_value();
                if is_index_call(i, self.hooks)
                    || (i.as_terminator().is_none()
                        && !value.ty().is_void()
                        && kinds.of(value) != Kind::Varying)
                {
                    continue;
                }
                let mut set_thread = false;
                if let Some(call) = value.as_call()
                    && let Some(f) = callee(call)
                {
                    if f.name().starts_with(b"llvm.lifetime.") {
                        continue;
                    }
                    set_thread = f.intrinsic_id().is_none() && !self.hooks.is_hook(f);
                }
                let mut operands = Vec::new();
                for index in 0..i.num_operands() {
                    let Some(op) = i.operand(index) else { continue };
                    if op.is_basic_block() {
                        continue;
                    }
                    let mapped = self.remap(op, &mut clone, kinds)?;
                    if mapped != op {
                        operands.push((index, mapped));
                    }
                }
                self.builder.position_at_end(copy);
                if set_thread {
                    // The index state the called function may read (a panic's report).
                    self.call(self.hooks.set_thread, &at.xyz);
                }
                if i.is_atomic() && self.is_block_memory(i) {
                    let operand = |index: u32| {
                        operands
                            .iter()
                            .find(|(k, _)| *k == index)
                            .map(|(_, v)| *v)
                            .or_else(|| i.operand(index))
                            .expect("an atomic access's operand")
                    };
                    if let Some(plain) = self.plain_access(i, &operand) {
                        clone.values.insert(value, plain);
                        continue;
                    }
                }
                let copied = self.builder.insert_clone(i);
                for (index, mapped) in operands {
                    copied.set_operand(index, mapped);
                }
                clone.values.insert(value, copied.as_value());
                if let Some(terminator) = copied.as_terminator() {
                    let successors: Vec<Block<'m>> = terminator.successors().collect();
                    for (index, successor) in successors.into_iter().enumerate() {
                        let key = (successor, None);
                        let target = match copies.get(&key) {
                            Some(b) => *b,
                            None => {
                                let b = self.block(c"r");
                                copies.insert(key, b);
                                work.push((key, b));
                                b
                            }
                        };
                        terminator.set_successor(index as u32, target);
                    }
                    break;
                }
            }
        }
        Ok(first_block)
    }

    /// Whether the atomic access `i` is to memory only the block's OS thread reaches (shared
    /// memory, the image's thread-locals, the thread's locals): in region form the block's
    /// threads run one after another there, so the access needs no atomic instruction.
    fn is_block_memory(&self, i: Instruction<'m>) -> bool {
        let pointer_index = if i.is_store() { 1 } else { 0 };
        let mut pointer = i.operand(pointer_index);
        while let Some(p) = pointer {
            let Some(def) = p.as_instruction() else {
                return false;
            };
            use InstructionOpcode as Op;
            match def.opcode() {
                Op::GetElementPtr | Op::BitCast | Op::AddrSpaceCast => pointer = def.operand(0),
                Op::Alloca => return true,
                Op::Call => {
                    return p.as_call().and_then(callee).is_some_and(|f| {
                        self.hooks.shared.contains(&Some(f))
                            || f.name() == b"llvm.threadlocal.address.p0"
                    });
                }
                _ => return false,
            }
        }
        false
    }

    /// The plain form of the atomic access `i` (operands from `operand`), built at the
    /// builder's position: its value (the old value, a load's value, or none for a store);
    /// `None` for an operation it has no plain form of.
    fn plain_access(
        &self,
        i: Instruction<'m>,
        operand: &dyn Fn(u32) -> Value<'m>,
    ) -> Option<Value<'m>> {
        let b = &self.builder;
        if i.is_load() || i.is_store() {
            let copied = b.insert_clone(i);
            for index in 0..i.num_operands() {
                copied.set_operand(index, operand(index));
            }
            copied.make_not_atomic();
            return Some(copied.as_value());
        }
        let pointer = operand(0);
        if i.is_cmpxchg() {
            let (expected, new) = (operand(1), operand(2));
            let old = b.build_load(expected.ty(), pointer, c"").as_value();
            let equal = b.build_icmp(IntPredicate::EQ, old, expected, c"");
            let stored = b.build_select(equal, new, old, c"");
            b.build_store(stored, pointer);
            let pair = b.build_insert_value(i.as_value().ty().poison(), old, 0, c"");
            return Some(b.build_insert_value(pair, equal, 1, c""));
        }
        let op = i.atomic_rmw_op()?;
        let v = operand(1);
        let old = b.build_load(v.ty(), pointer, c"").as_value();
        let new = match op {
            AtomicRmwOp::Xchg => v,
            AtomicRmwOp::Binary(opcode) => b.build_binop(opcode, old, v, c""),
            AtomicRmwOp::Nand => {
                let and = b.build_binop(InstructionOpcode::And, old, v, c"");
                b.build_not(and, c"")
            }
            AtomicRmwOp::Keep(keep) => {
                let keep_old = b.build_icmp(keep, old, v, c"");
                b.build_select(keep_old, old, v, c"")
            }
        };
        b.build_store(new, pointer);
        Some(old)
    }

    /// Ends a thread's run of the region: it leaves with `state`.
    fn leave(&self, at: &ThreadAt<'m>, state: Value<'m>, flagged: bool) {
        let b = &self.builder;
        let state = if flagged {
            // A thread that returns leaves no block value: the threads that go on do.
            for slot in &self.block_slots {
                b.build_store(b.build_load(slot.ty, slot.local, c"").as_value(), slot.next);
            }
            b.build_or(state, at.flag, c"")
        } else {
            state
        };
        b.build_store(state, at.state);
        b.build_br(at.latch);
    }

    /// What `op`, an operand of the body, is in a region's clone: its copy, the entry point's
    /// parameters or local, the thread's index, a per-block value, or a value computed again
    /// at the clone's end.
    fn remap(
        &mut self,
        op: Value<'m>,
        clone: &mut RegionClone<'_, 'm>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Value<'m>, String> {
        if let Some(v) = clone.values.get(&op) {
            return Ok(*v);
        }
        if op == self.body_params {
            return Ok(self.params);
        }
        if let Some(v) = self.single.get(&op).or_else(|| clone.locals.get(&op)) {
            return Ok(*v);
        }
        let Some(i) = op.as_instruction() else {
            return Ok(op);
        };
        if is_index_call(i, self.hooks) {
            let which = index_of(i)?;
            return Ok(match which {
                0..3 => clone.at.xyz[which as usize],
                w => *self
                    .block_values
                    .get(&w)
                    .ok_or_else(|| with_location("the index hook asked an unknown index", i))?,
            });
        }
        match kinds.of(op) {
            Kind::Hoistable => self.hoist(op),
            Kind::Recomputed => {
                let mut operands = Vec::new();
                for index in 0..i.num_operands() {
                    let Some(o) = i.operand(index) else { continue };
                    let mapped = self.remap(o, clone, kinds)?;
                    if mapped != o {
                        operands.push((index, mapped));
                    }
                }
                self.builder.position_at_end(clone.current);
                let copied = self.builder.insert_clone(i);
                for (index, mapped) in operands {
                    copied.set_operand(index, mapped);
                }
                clone.values.insert(op, copied.as_value());
                Ok(copied.as_value())
            }
            Kind::Varying => Err(with_location(
                "internal error: a value crosses a barrier without a slot",
                i,
            )),
        }
    }

    /// `op`'s value computed once per block.
    fn hoist(&mut self, op: Value<'m>) -> std::result::Result<Value<'m>, String> {
        if let Some(v) = self.hoisted.get(&op) {
            return Ok(*v);
        }
        if op == self.body_params {
            return Ok(self.params);
        }
        let Some(i) = op.as_instruction() else {
            return Ok(op);
        };
        if is_index_call(i, self.hooks) {
            let which = index_of(i)?;
            return self
                .block_values
                .get(&which)
                .copied()
                .ok_or_else(|| with_location("a thread's index computed once per block", i));
        }
        let mut operands = Vec::new();
        for index in 0..i.num_operands() {
            let Some(o) = i.operand(index) else { continue };
            operands.push((index, self.hoist(o)?));
        }
        self.builder.position_before(self.hoist_point);
        let clone = self.builder.insert_clone(i);
        for (index, value) in operands {
            if clone.operand(index) != Some(value) {
                clone.set_operand(index, value);
            }
        }
        self.hoisted.insert(op, clone.as_value());
        Ok(clone.as_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel side's hooks, as a CPU image's bitcode defines them (their bodies do not
    /// matter here), and `body` as the body of kernel `k`.
    fn module_text(body: &str) -> String {
        format!(
            "target datalayout = \"e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128\"
target triple = \"x86_64-unknown-linux-gnu\"
@state = internal global [12 x i32] zeroinitializer
define i32 @__offload_cpuir_index(i32 %w) noinline {{
  %p = getelementptr i32, ptr @state, i32 %w
  %v = load i32, ptr %p
  ret i32 %v
}}
define void @__offload_cpuir_barrier() noinline {{ ret void }}
define void @__offload_cpuir_warp_barrier() noinline {{ ret void }}
define void @__offload_cpuir_enter(ptr %l) noinline {{ ret void }}
define void @__offload_cpuir_begin_block(ptr %l, i64 %b) noinline {{ ret void }}
define void @__offload_cpuir_set_thread(i32 %x, i32 %y, i32 %z) noinline {{ ret void }}
define ptr @__offload_cpuir_lanes(i64 %n) noinline {{ ret ptr null }}
{body}"
        )
    }

    /// Forms the regions of `body` (kernel `k`), verifies the module and returns its text and
    /// the kernels that keep coroutines.
    fn form(body: &str) -> (String, Vec<CoroutineKernel>) {
        let context = inkwell::context::Context::create();
        let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(
            module_text(body).as_bytes(),
            "test",
        );
        let module = context.create_module_from_ir(buffer).expect("parses");
        let kept = form_regions(Module::new(&module)).expect("forms the regions");
        module.verify().unwrap_or_else(|e| {
            panic!(
                "{}\n{}",
                e.to_string(),
                module.print_to_string().to_string()
            )
        });
        (module.print_to_string().to_string(), kept)
    }

    /// A reduction's shape: a value computed before a barrier (the thread's element) used
    /// after it, a loop around a barrier whose trip count the block shares, an early return.
    const LOOP_BODY: &str = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %n = call i32 @__offload_cpuir_index(i32 6)
  %slot = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %slot
  %sq = mul i32 %v, %v
  call void @__offload_cpuir_barrier()
  br label %loop
loop:
  %half = phi i32 [ %n, %entry ], [ %next, %body ]
  %done = icmp ult i32 %half, 2
  br i1 %done, label %exit, label %body
body:
  %next = lshr i32 %half, 1
  call void @__offload_cpuir_barrier()
  br label %loop
exit:
  %out = getelementptr i32, ptr %data, i32 %t
  store i32 %sq, ptr %out
  ret void
}";

    #[test]
    fn a_body_with_barriers_becomes_a_region_entry_point() {
        let (text, kept) = form(LOOP_BODY);
        assert!(kept.is_empty(), "{kept:?}");
        assert!(
            text.contains("define i32 @__offload_cpu_irregions_k(ptr %0, ptr %1, i64 %2, i64 %3)"),
            "{text}"
        );
        // The body is gone, and no barrier is called any more: the regions are loops.
        assert!(!text.contains("@__offload_cpu_body_k"), "{text}");
        let entry = text
            .split("define i32 @__offload_cpu_irregions_k")
            .nth(1)
            .unwrap();
        assert!(
            !entry.contains("call void @__offload_cpuir_barrier"),
            "{entry}"
        );
        // The element squared lives across the barriers: a slot per thread in the lanes,
        // addressed by the thread's rank.
        assert!(entry.contains("call ptr @__offload_cpuir_lanes"), "{entry}");
        assert!(entry.contains("mul i64 %rank, 4"), "{entry}");
        // The index hook is inlined everywhere else.
        assert!(text.contains("alwaysinline"), "{text}");
    }

    /// The region entry point of kernel `k` in `text`.
    fn entry_point(text: &str) -> &str {
        text.split("define i32 @__offload_cpu_irregions_k")
            .nth(1)
            .unwrap_or_else(|| panic!("no region entry point in:\n{text}"))
    }

    /// A loop counter every thread computes alike from a block-wide value, under branches on
    /// it alone, is kept once per block: its slot is a local of the entry point, not a lane.
    #[test]
    fn a_loop_counter_the_block_shares_is_kept_once_per_block() {
        let (text, _) = form(LOOP_BODY);
        let entry = entry_point(&text);
        assert!(entry.contains("%block.slot = alloca i32"), "{entry}");
        assert!(entry.contains("%block.next = alloca i32"), "{entry}");
        // Still so when threads leave early (a return past no barrier).
        let early = LOOP_BODY.replace(
            "  call void @__offload_cpuir_barrier()\n  br label %loop\nloop:",
            "  call void @__offload_cpuir_barrier()\n  %out_of_range = icmp ugt i32 %t, 1000\n  \
             br i1 %out_of_range, label %early, label %loop\nearly:\n  ret void\nloop:",
        );
        assert_ne!(early, LOOP_BODY);
        let (text, _) = form(&early);
        assert!(
            entry_point(&text).contains("%block.slot = alloca i32"),
            "{text}"
        );
    }

    /// A counter that depends on the thread, or any counter of a body with a barrier under a
    /// thread's own condition, stays per thread.
    #[test]
    fn a_counter_of_the_thread_or_a_divergent_barrier_keeps_lanes() {
        let per_thread =
            LOOP_BODY.replace("%next = lshr i32 %half, 1", "%next = lshr i32 %half, %t");
        let divergent = LOOP_BODY.replace(
            "  %next = lshr i32 %half, 1\n  call void @__offload_cpuir_barrier()\n  br label %loop",
            "  %next = lshr i32 %half, 1\n  %mine = icmp ult i32 %t, %half\n  \
             br i1 %mine, label %wait, label %loop\nwait:\n  \
             call void @__offload_cpuir_barrier()\n  br label %loop",
        );
        for body in [per_thread, divergent] {
            assert_ne!(body, LOOP_BODY);
            let (text, kept) = form(&body);
            assert!(kept.is_empty(), "{kept:?}");
            let entry = entry_point(&text);
            assert!(!entry.contains("block.slot"), "{entry}");
            assert!(entry.contains("call ptr @__offload_cpuir_lanes"), "{entry}");
        }
    }

    #[test]
    fn a_barrier_reached_through_recursion_keeps_coroutines_with_a_note() {
        let body = "
define void @__offload_cpu_body_k(ptr %params) {
  call void @again(i32 3)
  ret void
}
define internal void @again(i32 %n) noinline {
  call void @__offload_cpuir_barrier()
  %z = icmp eq i32 %n, 0
  br i1 %z, label %out, label %more
more:
  %m = sub i32 %n, 1
  call void @again(i32 %m)
  call void @__offload_cpuir_barrier()
  br label %out
out:
  ret void
}";
        let (text, kept) = form(body);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].kernel, "k");
        assert!(
            kept[0]
                .reason
                .contains("`again` reaches a barrier and calls itself")
        );
        assert!(text.contains("@__offload_cpu_note_k = constant"), "{text}");
        assert!(!text.contains("@__offload_cpu_irregions_k"), "{text}");
    }

    #[test]
    fn a_body_without_barriers_gets_no_region_entry_point() {
        let body = "
define void @__offload_cpu_body_k(ptr %params) {
  %t = call i32 @__offload_cpuir_index(i32 0)
  ret void
}";
        let (text, kept) = form(body);
        assert!(kept.is_empty());
        assert!(!text.contains("@__offload_cpu_irregions_k"), "{text}");
        assert!(!text.contains("@__offload_cpu_body_k"), "{text}");
    }

    #[test]
    fn a_barrier_in_a_helper_is_inlined_and_formed() {
        let body = "
define void @__offload_cpu_body_k(ptr %params) {
  %t = call i32 @__offload_cpuir_index(i32 0)
  call void @helper(i32 %t) #0
  ret void
}
define internal void @helper(i32 %t) noinline {
  call void @__offload_cpuir_barrier()
  ret void
}
attributes #0 = { noinline }";
        let (text, kept) = form(body);
        assert!(kept.is_empty(), "{kept:?}");
        assert!(text.contains("@__offload_cpu_irregions_k"), "{text}");
        // The inliner deleted the helper: the stage must not touch it afterwards.
        assert!(!text.contains("@helper"), "{text}");
    }

    #[test]
    fn rust_symbols_are_named_readably() {
        assert_eq!(
            demangled("_ZN23offload_rt_test_kernels5halve17h0123456789abcdefE"),
            "offload_rt_test_kernels::halve"
        );
        assert_eq!(demangled("plain"), "plain");
    }
}

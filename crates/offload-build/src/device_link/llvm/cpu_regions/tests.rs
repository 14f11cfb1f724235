use super::super::ir::Value;
use super::hooks::demangled;
use super::*;

/// The kernel side's hooks, as a CPU image's bitcode defines them (their bodies do not
/// matter here), and `body` as the body of kernel `k`.
fn module_text(body: &str) -> String {
    format!(
        "target datalayout = \"e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128\"
target triple = \"x86_64-unknown-linux-gnu\"
@state = internal global [13 x i32] zeroinitializer
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
define i1 @__offload_cpuir_interleaved() noinline {{ ret i1 false }}
define void @__offload_cpuir_interleave() noinline {{ ret void }}
define i32 @__offload_cpuir_warp_turn(i32 %rank) noinline {{ ret i32 0 }}
{body}"
    )
}

/// Forms the regions of `body` (kernel `k`), verifies the module and returns its text and
/// the kernels that keep coroutines.
fn form(body: &str) -> (String, Vec<CoroutineKernel>) {
    form_with(body, ThreadLoops::NARROW)
}

/// [`form`] for an image whose thread loops are shaped as `shape` says.
fn form_with(body: &str, shape: ThreadLoops) -> (String, Vec<CoroutineKernel>) {
    let context = inkwell::context::Context::create();
    let module = parse(&context, body);
    let kept = form_regions(Module::new(&module), shape).expect("forms the regions");
    module.verify().unwrap_or_else(|e| {
        panic!(
            "{}\n{}",
            e.to_string(),
            module.print_to_string().to_string()
        )
    });
    (module.print_to_string().to_string(), kept)
}

/// `body` in the module [`module_text`] makes of it, parsed.
fn parse<'c>(context: &'c inkwell::context::Context, body: &str) -> inkwell::module::Module<'c> {
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(
        module_text(body).as_bytes(),
        "test",
    );
    context.create_module_from_ir(buffer).expect("parses")
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
    let per_thread = LOOP_BODY.replace("%next = lshr i32 %half, 1", "%next = lshr i32 %half, %t");
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

/// An accumulator of a loop around a barrier: read after the barrier, written back at the end
/// of each trip.
const ACCUMULATOR_BODY: &str = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %slot = getelementptr i32, ptr %data, i32 %t
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %acc = phi i32 [ 0, %entry ], [ %acc.next, %loop ]
  %v = load i32, ptr %slot
  call void @__offload_cpuir_barrier()
  %acc.next = add i32 %acc, %v
  %i.next = add i32 %i, 1
  %done = icmp eq i32 %i.next, 4
  br i1 %done, label %exit, label %loop
exit:
  store i32 %acc.next, ptr %slot
  ret void
}";

/// The number of per-thread slots in lane storage the entry point `entry` asks for (each is
/// aligned to 64 bytes in the sum it passes the lanes hook).
fn lane_slots(entry: &str) -> usize {
    let before = entry
        .split("call ptr @__offload_cpuir_lanes")
        .next()
        .unwrap_or_default();
    before.matches(", 63\n").count()
}

/// The accumulator is read after the barrier from its phi's slot, which no store changes
/// before that read: no second slot, no copy into it each trip. Read after the loop too,
/// where the trip's store has changed the slot, it takes a slot of its own, and the phi's
/// slot, written after the barrier and read at the loop's top (one region), is no thread's
/// state any more: as many lanes as before.
#[test]
fn a_loop_accumulator_across_a_barrier_keeps_one_slot() {
    let (text, kept) = form(ACCUMULATOR_BODY);
    assert!(kept.is_empty(), "{kept:?}");
    let one = lane_slots(entry_point(&text));
    let after_the_loop = ACCUMULATOR_BODY.replace(
        "  store i32 %acc.next, ptr %slot",
        "  store i32 %acc.next, ptr %slot\n  store i32 %acc, ptr %data",
    );
    assert_ne!(after_the_loop, ACCUMULATOR_BODY);
    let (text, kept) = form(&after_the_loop);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(one >= 2, "{one} slots in:\n{entry}");
    assert_eq!(lane_slots(entry), one, "{entry}");
}

/// A flag a thread keeps across a barrier (`i1`) is a byte in its lanes: the region loops
/// store and load bytes, which LLVM stores as one masked vector where it scalarized a vector
/// of `i1` (a branch and a byte store a lane).
#[test]
fn a_flag_kept_across_a_barrier_is_a_byte_in_the_lanes() {
    let flag = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %slot = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %slot
  %big = icmp ugt i32 %v, 7
  call void @__offload_cpuir_barrier()
  br i1 %big, label %yes, label %no
yes:
  store i32 0, ptr %slot
  br label %no
no:
  ret void
}";
    let (text, kept) = form(flag);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(lane_slots(entry), 1, "{entry}");
    let widened = |l: &&str| l.contains("= zext i1 ") && l.ends_with(" to i8");
    assert!(entry.lines().any(|l| widened(&l)), "{entry}");
    assert!(entry.contains("= load i8, ptr"), "{entry}");
    let flags_stored = entry
        .lines()
        .filter(|l| {
            // The scheduler's own flags are `i1` locals of the entry point.
            l.contains("store i1") && !l.contains("%summary.") && !l.contains("%pieces.")
        })
        .count();
    assert_eq!(flags_stored, 0, "{entry}");
}

/// A local array of a loop around a barrier: written and read between the barrier and the
/// loop's end, its lifetime starting each trip, it is the trip's scratch and takes no lanes;
/// read after the barrier where the trips before wrote, it is each thread's own.
#[test]
fn a_local_used_between_barriers_takes_no_lanes() {
    let scratch = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %out = getelementptr i32, ptr %data, i32 %t
  %local = alloca [16 x i32]
  %m = and i32 %t, 15
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  call void @__offload_cpuir_barrier()
  call void @llvm.lifetime.start.p0(ptr %local)
  %w = getelementptr [16 x i32], ptr %local, i32 0, i32 %i
  store i32 %t, ptr %w
  %r = getelementptr [16 x i32], ptr %local, i32 0, i32 %m
  %a = load i32, ptr %r
  store i32 %a, ptr %out
  call void @llvm.lifetime.end.p0(ptr %local)
  %i.next = add i32 %i, 1
  %done = icmp eq i32 %i.next, 4
  br i1 %done, label %exit, label %loop
exit:
  ret void
}";
    let (text, kept) = form(scratch);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(entry.contains("alloca [16 x i32]"), "{entry}");
    assert!(!entry.contains("mul i64 %rank, 64"), "{entry}");
    let carried = scratch
        .replace("  call void @llvm.lifetime.start.p0(ptr %local)\n", "")
        .replace("  call void @llvm.lifetime.end.p0(ptr %local)\n", "");
    assert_ne!(carried, scratch);
    let (text, kept) = form(&carried);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(entry.contains("mul i64 %rank, 64"), "{entry}");
}

/// How many blocks of the entry point `entry` are labelled `label` (`label`, `label1`, …).
fn labelled(entry: &str, label: &str) -> usize {
    entry
        .lines()
        .filter(|l| l.starts_with(label) && l.contains(':'))
        .count()
}

/// How many regions of the entry point `entry` go on without the scheduler's pass over the
/// threads' states: one `together` block each.
fn regions_left_together(entry: &str) -> usize {
    labelled(entry, "together")
}

/// A branch on the thread's index that joins again before the barrier, and branches on what
/// the block shares (its loop counter): each region's threads leave it together.
#[test]
fn threads_that_can_only_leave_a_region_together_skip_the_scan() {
    let (text, kept) = form(LOOP_BODY);
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(regions_left_together(entry_point(&text)), 3, "{text}");
    let joined = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %n = call i32 @__offload_cpuir_index(i32 6)
  %h = lshr i32 %n, 1
  %in = icmp ult i32 %t, %h
  br i1 %in, label %write, label %wait
write:
  %slot = getelementptr i32, ptr %data, i32 %t
  store i32 1, ptr %slot
  br label %wait
wait:
  call void @__offload_cpuir_barrier()
  ret void
}";
    let (text, kept) = form(joined);
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(regions_left_together(entry_point(&text)), 2, "{text}");
}

/// Threads that return early on a condition of their own while the others wait at the
/// barrier leave that region apart: the scheduler reads their states after it.
#[test]
fn an_early_return_of_some_threads_keeps_the_scan() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %n = call i32 @__offload_cpuir_index(i32 6)
  %h = lshr i32 %n, 1
  %in = icmp ult i32 %t, %h
  br i1 %in, label %wait, label %leave
wait:
  call void @__offload_cpuir_barrier()
  br label %out
leave:
  store i32 1, ptr %data
  br label %out
out:
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    // The start's threads leave apart (those that return store on their way: they are not
    // parked); the region after the barrier only returns.
    assert_eq!(regions_left_together(entry), 1, "{entry}");
    assert!(entry.contains("\nscan:"), "{entry}");
}

/// A branch on the thread's index whose ways each leave the loop or go on to its barrier as
/// the counter the block keeps says (two tests of it, one on each way, as a merged barrier's
/// ways have them): every thread leaves where the others do. Tested on the thread's own value
/// instead, they leave apart.
#[test]
fn ways_that_each_leave_by_the_blocks_counter_leave_together() {
    let body = |last_b: &str| {
        format!(
            "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %own = getelementptr i32, ptr %data, i32 %t
  call void @__offload_cpuir_barrier()
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %tail ]
  %low = icmp ult i32 %t, 8
  br i1 %low, label %a, label %b
a:
  store i32 1, ptr %own
  %last_a = icmp eq i32 %i, 3
  br i1 %last_a, label %end, label %tail
b:
  store i32 2, ptr %own
  %last_b = {last_b}
  br i1 %last_b, label %end, label %tail
tail:
  %next = add i32 %i, 1
  call void @__offload_cpuir_barrier()
  br label %loop
end:
  ret void
}}"
        )
    };
    let (text, kept) = form(&body("icmp eq i32 %i, 3"));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(regions_left_together(entry), 3, "{entry}");
    let (text, kept) = form(&body("icmp eq i32 %t, 3"));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(regions_left_together(entry), 1, "{entry}");
}

/// Where the rows are cut at the test that sends some threads to the barrier and the others
/// out, each piece's threads leave at one state: the loop keeps the scheduler's summary as it
/// runs and the pass over the states is skipped. Where a thread's own value decides, it is not.
#[test]
fn pieces_whose_threads_leave_at_one_state_each_skip_the_scan() {
    let body = |test: &str| {
        format!(
            "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %n = call i32 @__offload_cpuir_index(i32 6)
  %h = lshr i32 %n, 1
  %own = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %own
  {test}
  br i1 %in, label %wait, label %skip
wait:
  call void @__offload_cpuir_barrier()
  store i32 1, ptr %own
  br label %out
skip:
  store i32 3, ptr %own
  br label %out
out:
  ret void
}}"
        )
    };
    let (text, kept) = form(&body("%in = icmp ult i32 %t, %h"));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "cut.above"), 1, "{entry}");
    assert_eq!(labelled(entry, "summarized.outside"), 1, "{entry}");
    // The thread at `x == 0` runs alone, its copy's test of `x` answered.
    let (text, kept) = form(&body(
        "%zero = icmp eq i32 %t, 0
  %low = icmp ult i32 %t, %h
  %in = or i1 %zero, %low",
    ));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "single.go"), 1, "{entry}");
    assert_eq!(labelled(entry, "summarized.outside"), 1, "{entry}");
    let (text, kept) = form(&body("%in = icmp ult i32 %v, %h"));
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(labelled(entry_point(&text), "summarized"), 0, "{text}");
}

/// A region whose rows run a warp at a time, the first warp to a warp barrier and the others to
/// the block barrier: each piece's threads leave at its first thread's state, which the loop
/// adds to the summary once the piece ran. The first warp's region after its warp barrier then
/// takes it to the block barrier where the others wait, which the summary knows: every live
/// thread was at one of two states.
#[test]
fn pieces_of_one_warp_leave_at_their_first_threads_state() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %own = getelementptr i32, ptr %data, i32 %t
  store i32 0, ptr %own
  %warp = lshr i32 %t, 5
  %first_warp = icmp eq i32 %warp, 0
  br i1 %first_warp, label %lanes, label %wait
lanes:
  call void @__offload_cpuir_warp_barrier()
  store i32 1, ptr %own
  br label %wait
wait:
  call void @__offload_cpuir_barrier()
  store i32 2, ptr %own
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "piece.left"), 1, "{entry}");
    assert_eq!(labelled(entry, "summarized.outside"), 1, "{entry}");
    assert!(entry.contains("load i1, ptr %summary.two"), "{entry}");
}

/// A reduction's last warp: after the block barrier the threads below 32 go on to warp
/// operations and the others return, storing nothing on the way (the store of `x == 0` is not
/// theirs). The region runs the first 32 threads only, the others parked as returned, and
/// the region after the warp barrier runs the live threads of each row without the
/// scheduler. Tested on the thread's own value instead, or with a store on the way of those
/// that return, the region's threads leave apart as before.
#[test]
fn threads_past_a_bound_that_return_are_parked() {
    let body = |test: &str, skipped: &str| {
        format!(
            "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %own = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %own
  call void @__offload_cpuir_barrier()
  {test}
  br i1 %low, label %lanes, label %rest
lanes:
  call void @__offload_cpuir_warp_barrier()
  store i32 1, ptr %own
  br label %rest
rest:
  {skipped}
  %first = icmp eq i32 %t, 0
  br i1 %first, label %one, label %out
one:
  store i32 2, ptr %data
  br label %out
out:
  ret void
}}"
        )
    };
    let (text, kept) = form(&body("%low = icmp ult i32 %t, 32", ""));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "row.live"), 1, "{entry}");
    assert_eq!(labelled(entry, "unpark"), 0, "{entry}");
    assert!(entry.contains("%live.width"), "{entry}");
    for (test, skipped) in [
        ("%low = icmp ult i32 %v, 32", ""),
        ("%low = icmp ult i32 %t, 32", "store i32 3, ptr %own"),
    ] {
        let (text, kept) = form(&body(test, skipped));
        assert!(kept.is_empty(), "{kept:?}");
        let entry = entry_point(&text);
        assert_eq!(labelled(entry, "row.live"), 0, "{test} {skipped}: {entry}");
    }
}

/// A scan's first warp (`rank >> 5 == 0`) goes through warp operations to the block barrier
/// where the other warps wait: those are parked there, the first warp's regions run its
/// threads alone (a rank's prefix of the rows), and the barrier's region runs every thread
/// again. Where the first warp returns instead of reaching the others' barrier, nothing is
/// parked.
#[test]
fn a_first_warp_runs_alone_while_the_others_wait_at_its_barrier() {
    let body = |after_lanes: &str| {
        format!(
            "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %r = call i32 @__offload_cpuir_index(i32 12)
  %own = getelementptr i32, ptr %data, i32 %t
  %warp = lshr i32 %r, 5
  %first_warp = icmp eq i32 %warp, 0
  br i1 %first_warp, label %lanes, label %wait
lanes:
  call void @__offload_cpuir_warp_barrier()
  store i32 1, ptr %own
  {after_lanes}
wait:
  call void @__offload_cpuir_barrier()
  store i32 2, ptr %own
  ret void
}}"
        )
    };
    let (text, kept) = form(&body("br label %wait"));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "row.live"), 1, "{entry}");
    // Each region left together unparks where its threads go to the barrier.
    assert_eq!(
        labelled(entry, "unparked"),
        regions_left_together(entry),
        "{entry}"
    );
    assert!(entry.contains("ptr %live.rank.end"), "{entry}");
    let (text, kept) = form(&body("ret void"));
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(labelled(entry_point(&text), "row.live"), 0, "{text}");
}

/// A tree reduction's levels: threads below the halving stride add, the others only wait.
const TREE_BODY: &str = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %n = call i32 @__offload_cpuir_index(i32 6)
  br label %loop
loop:
  %s = phi i32 [ %n, %entry ], [ %half, %join ]
  %half = lshr i32 %s, 1
  %done = icmp eq i32 %half, 0
  br i1 %done, label %exit, label %level
level:
  %in = icmp ult i32 %t, %half
  br i1 %in, label %add, label %join
add:
  %slot = getelementptr i32, ptr %data, i32 %t
  %far = add i32 %t, %half
  %other = getelementptr i32, ptr %data, i32 %far
  %a = load i32, ptr %slot
  %b = load i32, ptr %other
  %sum = add i32 %a, %b
  store i32 %sum, ptr %slot
  br label %join
join:
  call void @__offload_cpuir_barrier()
  br label %loop
exit:
  ret void
}";

/// How many regions of the entry point `entry` probe each row's first thread for the bound
/// and run the row up to it: one `row.rest` block each.
fn trimmed_regions(entry: &str) -> usize {
    labelled(entry, "row.rest")
}

/// The blocks of `entry` (label and text) a run that starts at a block labelled `from..`
/// passes through before it reaches one labelled `to..`.
fn blocks_between<'t>(entry: &'t str, from: &str, to: &str) -> Vec<&'t str> {
    let mut blocks: Vec<(&str, &str)> = Vec::new();
    let mut start = 0;
    for (at, _) in entry.match_indices('\n') {
        let line = &entry[at + 1..];
        if let Some((label, _)) = line.split_once(':')
            && !label.starts_with(' ')
            && !label.contains(' ')
        {
            if let Some(last) = blocks.last_mut() {
                last.1 = &entry[start..at];
            }
            blocks.push((label, ""));
            start = at + 1;
        }
    }
    if let Some(last) = blocks.last_mut() {
        last.1 = &entry[start..];
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut work: Vec<&str> = blocks
        .iter()
        .filter(|(label, _)| label.starts_with(from))
        .map(|(label, _)| *label)
        .collect();
    let mut passed = Vec::new();
    while let Some(label) = work.pop() {
        if label.starts_with(to) || seen.contains(&label) {
            continue;
        }
        seen.push(label);
        let Some((_, text)) = blocks.iter().find(|(l, _)| *l == label) else {
            continue;
        };
        passed.push(*text);
        let terminator = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with("br "));
        for target in terminator
            .into_iter()
            .flat_map(|t| t.split("label %").skip(1))
        {
            let name = target.split([',', ' ']).next().unwrap_or_default();
            work.push(
                blocks
                    .iter()
                    .find(|(l, _)| *l == name)
                    .map_or("", |(l, _)| *l),
            );
        }
    }
    passed
}

/// A tree level of a sum each thread keeps in a value (`if t < 128 { sum += x }` after a
/// barrier, as `reduce5` writes it): the threads past the bound would copy the old sum into
/// the phi's slot, but the old sum is stored there where it is made, so the level's region
/// runs only the threads below the bound; an old sum the slot no longer holds is copied.
#[test]
fn a_sum_updated_below_a_bound_shares_its_phis_slot() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %own = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %own
  %sum0 = add i32 %v, 1
  call void @__offload_cpuir_barrier()
  %in = icmp ult i32 %t, 128
  br i1 %in, label %update, label %joined
update:
  %far = add i32 %t, 128
  %at = getelementptr i32, ptr %data, i32 %far
  %x = load i32, ptr %at
  %sum1 = add i32 %sum0, %x
  store i32 %sum1, ptr %own
  br label %joined
joined:
  %sum = phi i32 [ %sum1, %update ], [ %sum0, %entry ]
  call void @__offload_cpuir_barrier()
  %lead = icmp eq i32 %t, 0
  br i1 %lead, label %write, label %out
write:
  store i32 %sum, ptr %data
  br label %out
out:
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(trimmed_regions(entry_point(&text)), 1, "{text}");
    assert!(shares_a_slot(body, "sum", "sum0"));
    // The level in a loop, its old sum made before the loop: at the loop's next trip the slot
    // holds the last trip's sum, not the old one, so the two keep a slot each.
    let in_a_loop = body
        .replace(
            "  call void @__offload_cpuir_barrier()\n  %in",
            "  br label %level\nlevel:\n  %k = phi i32 [ 0, %entry ], [ %k1, %joined ]
  call void @__offload_cpuir_barrier()\n  %in",
        )
        .replace("[ %sum0, %entry ]", "[ %sum0, %level ]")
        .replace(
            "  %sum = phi i32 [ %sum1, %update ], [ %sum0, %level ]\n",
            "  %sum = phi i32 [ %sum1, %update ], [ %sum0, %level ]
  %k1 = add i32 %k, 1
  %again = icmp ult i32 %k1, 4
  br i1 %again, label %level, label %last\nlast:\n",
        );
    assert!(in_a_loop.contains("%again"), "{in_a_loop}");
    let (_, kept) = form(&in_a_loop);
    assert!(kept.is_empty(), "{kept:?}");
    assert!(!shares_a_slot(&in_a_loop, "sum", "sum0"), "{in_a_loop}");
}

/// Whether [`phi_groups`](super::phi_groups::phi_groups) puts the phi `%phi` of `body` and
/// its incoming value `%value` in one slot.
fn shares_a_slot(body: &str, phi: &str, value: &str) -> bool {
    let context = inkwell::context::Context::create();
    let module = parse(&context, body);
    let function = Module::new(&module)
        .function(&format!("{}k", abi::CPU_BODY_PREFIX))
        .expect("the body");
    let instructions: Vec<_> = function.blocks().flat_map(|b| b.instructions()).collect();
    let named = |name: &str| {
        *instructions
            .iter()
            .find(|i| i.as_value().name() == name.as_bytes())
            .unwrap_or_else(|| panic!("no %{name}"))
    };
    let phis: Vec<_> = instructions
        .iter()
        .copied()
        .filter(|i| i.as_value().is_phi())
        .collect();
    let hooks = super::hooks::Hooks::find(Module::new(&module))
        .complete()
        .expect("the hooks");
    let is_thread_x = |v: Value<'_>| super::emit::is_thread_x(v, &hooks);
    let groups =
        super::phi_groups::phi_groups(&phis, &std::collections::HashSet::new(), &is_thread_x);
    let (phi, value) = (named(phi), named(value));
    groups
        .get(&phi)
        .is_some_and(|lead| groups.get(&value) == Some(lead))
}

/// Both regions of a tree reduction (the start and the one after the level's barrier) run
/// only the threads below the stride; a thread past it that stores something keeps them all.
#[test]
fn threads_past_a_bound_that_only_wait_are_not_run() {
    let (text, kept) = form(TREE_BODY);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(regions_left_together(entry), 2, "{entry}");
    assert_eq!(trimmed_regions(entry), 2, "{entry}");
    assert!(entry.contains("store i32 1, ptr %trim.reached"), "{entry}");
    // The row's loop starts at its first thread, which the probe only ran up to the bound.
    assert_eq!(entry.matches("[ 0, %row.rest").count(), 2, "{entry}");
    assert!(
        blocks_between(entry, "probe", "row.rest")
            .iter()
            .all(|b| !b.contains("store i32 %sum")),
        "{entry}"
    );
    let busy = TREE_BODY.replace(
        "  br i1 %in, label %add, label %join\n",
        "  br i1 %in, label %add, label %count\ncount:\n  store i32 0, ptr %data\n  br label %join\n",
    );
    assert_ne!(busy, TREE_BODY);
    let (text, kept) = form(&busy);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(regions_left_together(entry), 2, "{entry}");
    assert_eq!(trimmed_regions(entry), 0, "{entry}");
}

/// A probe leaves the way to the trim branch where the block does (the reduction's end, where
/// its first thread adds the sum to a word of global memory), having done nothing.
#[test]
fn a_trimmed_regions_probe_runs_nothing_past_the_way_to_its_branch() {
    let tail = TREE_BODY.replace(
        "exit:\n  ret void",
        "exit:\n  %lead = icmp eq i32 %t, 0\n  br i1 %lead, label %publish, label %out\npublish:\n  \
         %total = load i32, ptr %data\n  %out.at = getelementptr i32, ptr %data, i32 64\n  \
         %old = atomicrmw add ptr %out.at, i32 %total monotonic\n  br label %out\nout:\n  ret void",
    );
    assert_ne!(tail, TREE_BODY);
    let (text, kept) = form(&tail);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(trimmed_regions(entry), 2, "{entry}");
    assert!(entry.contains("atomicrmw add"), "{entry}");
    let probed = blocks_between(entry, "probe", "row.rest");
    assert!(!probed.is_empty(), "{entry}");
    for block in probed {
        assert!(!block.contains("atomicrmw"), "{block}\n\nin\n{entry}");
        assert!(!block.contains("store i32 %sum"), "{block}\n\nin\n{entry}");
        assert!(!block.contains("state"), "{block}\n\nin\n{entry}");
    }
}

/// A warp's straight code between two warp barriers, under `if t < 32`, the other threads at a
/// block barrier: the guarded loop of the region after the first warp barrier, whose threads
/// all leave at the second (a later state), ends in the scheduler's shortcut with that state;
/// those of the regions after the second (to the block barrier, an earlier state) and after
/// the block barrier (a return) take the shortcut only where every live thread ran them;
/// the body's start, with two ways out, has none.
#[test]
fn a_guarded_loop_to_one_barrier_skips_the_scan() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %own = getelementptr i32, ptr %data, i32 %t
  %lead = icmp ult i32 %t, 32
  br i1 %lead, label %warp, label %wait
warp:
  store i32 1, ptr %own
  call void @__offload_cpuir_warp_barrier()
  store i32 2, ptr %own
  call void @__offload_cpuir_warp_barrier()
  store i32 3, ptr %own
  br label %wait
wait:
  call void @__offload_cpuir_barrier()
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "summarize.outside"), 3, "{entry}");
    assert_eq!(labelled(entry, "summarize.all"), 2, "{entry}");
    // The largest state after the onward one is the second warp barrier's, a constant.
    let max_phi = entry
        .lines()
        .find(|l| l.contains("= phi i32") && l.contains("%scanned ]"))
        .unwrap_or_default();
    let onward = max_phi.split("[ ").find_map(|incoming| {
        let (value, block) = incoming.split_once(", ")?;
        block.starts_with("%summarize.outside").then_some(value)
    });
    assert!(
        onward.is_some_and(|v| v.parse::<u32>().is_ok_and(|s| s > 1)),
        "{entry}"
    );
    assert!(entry.contains("\nscan:"), "{entry}");
}

/// A region whose first thread alone stores to a word the block shares runs that thread
/// apart from the loops over the others, whose copies of the region know the test's answer
/// (the guarded loop, threads at one of several barriers, keeps it). Where the word is the
/// thread's own (a halo's edge), the loop keeps the test in an image with AVX-512's masked
/// stores; in the others, the thread runs apart too.
#[test]
fn a_thread_storing_alone_to_a_shared_word_runs_apart() {
    let region = |address: &str| {
        format!(
            "  %first = icmp eq i32 %t, 0
  br i1 %first, label %lead, label %rest
lead:
{address}
  store i32 %t, ptr %to
  br label %rest
rest:"
        )
    };
    // The test stays in the guarded loop only (threads at one of several barriers).
    let tested_in_loops = |entry: &str| {
        entry
            .lines()
            .filter(|l| l.contains("icmp eq i32 %x") && l.ends_with(", 0"))
            .count()
    };
    let shared = body_with_region(
        "",
        "",
        &region("  %to = getelementptr i32, ptr @shared, i32 3"),
    );
    let own = body_with_region(
        "",
        "",
        &region("  %to = getelementptr i32, ptr %data, i32 %t"),
    );
    for shape in [ThreadLoops::AVX512, ThreadLoops::NARROW] {
        let (text, kept) = form_with(&shared, shape);
        assert!(kept.is_empty(), "{kept:?}");
        let entry = entry_point(&text);
        assert!(labelled(entry, "single.go") >= 1, "{entry}");
        assert_eq!(tested_in_loops(entry), 1, "{entry}");
    }
    let (text, kept) = form_with(&own, ThreadLoops::AVX512);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "single.go"), 0, "{entry}");
    assert_eq!(tested_in_loops(entry), 2, "{entry}");
    let (text, kept) = form_with(&own, ThreadLoops::NARROW);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(labelled(entry, "single.go") >= 1, "{entry}");
    assert_eq!(tested_in_loops(entry), 1, "{entry}");
}

/// A stencil's border test on the thread's column, `col == 0 || col == n - 1` with
/// `col = base + x`, in an image without AVX-512: threads `0 - base` and `n - 1 - base` of
/// each row run alone (where inside the row), and the loops' copies of the region know both
/// tests false, so that no test of either is left in a loop.
#[test]
fn a_border_test_on_the_threads_column_runs_its_threads_apart() {
    let region = "  %block = call i32 @__offload_cpuir_index(i32 3)
  %base = mul i32 %block, 16
  %col = add i32 %t, %base
  %n = call i32 @__offload_cpuir_index(i32 9)
  %last = add i32 %n, -1
  %left = icmp eq i32 %col, 0
  %right = icmp eq i32 %col, %last
  %border = or i1 %left, %right
  br i1 %border, label %edge, label %rest
edge:
  %own = getelementptr i32, ptr %data, i32 %t
  store i32 %t, ptr %own
  br label %rest
rest:";
    let body = body_with_region("", "", region);
    let (text, kept) = form_with(&body, ThreadLoops::NARROW);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "single.go"), 2, "{entry}");
    let differences = entry
        .lines()
        .filter(|l| l.contains("= sub i32") && l.trim_start().starts_with("%single"))
        .count();
    assert_eq!(differences, 2, "{entry}");
    // A loop's column is `x` plus the base; of the loops, only the guarded one (threads at
    // one of several barriers) still compares it, with 0 and with the last column.
    let columns: Vec<&str> = entry
        .lines()
        .filter(|l| l.contains(" = add i32 %x") && !l.ends_with(", 1"))
        .filter_map(|l| l.split(" = ").next())
        .map(str::trim)
        .collect();
    let compared = entry
        .lines()
        .filter(|l| l.contains("icmp eq i32"))
        .filter(|l| columns.iter().any(|c| l.contains(&format!("{c},"))))
        .count();
    assert_eq!(compared, 2, "{entry}");
}

/// A branch on `x < 16` (the threads past it not only waiting, so that the region is not
/// trimmed) cuts each row of its region in two loops, the threads below 16 and the others,
/// each copy of the region with the test decided (IRCE's loop for the threads
/// past such a test kept it, and SSE could not mask its loads), in every image; only the
/// guarded loop (threads at one of several barriers) still tests it. So for `x > -1` signed,
/// true for every thread: the cut is at 0.
#[test]
fn a_branch_on_an_order_of_x_cuts_the_rows() {
    let region = |test: &str| {
        format!(
            "  {test}
  %own = getelementptr i32, ptr %data, i32 %t
  br i1 %low, label %lead, label %other
lead:
  store i32 %t, ptr %own
  br label %rest
other:
  store i32 0, ptr %own
  br label %rest
rest:"
        )
    };
    let tests = |entry: &str, tail: &str| {
        entry
            .lines()
            .filter(|l| l.contains(" %x") && l.ends_with(tail))
            .count()
    };
    for shape in [ThreadLoops::AVX512, ThreadLoops::NARROW] {
        let body = body_with_region("", "", &region("%low = icmp ult i32 %t, 16"));
        let (text, kept) = form_with(&body, shape);
        assert!(kept.is_empty(), "{kept:?}");
        let entry = entry_point(&text);
        assert_eq!(labelled(entry, "cut.above"), 1, "{entry}");
        assert_eq!(tests(entry, ", 16"), 1, "{entry}");
    }
    let body = body_with_region("", "", &region("%low = icmp sgt i32 %t, -1"));
    let (text, kept) = form(&body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "cut.above"), 1, "{entry}");
    assert_eq!(tests(entry, ", -1"), 1, "{entry}");
    assert!(entry.contains("%bound = trunc i64 %"), "{entry}");
}

/// A branch on a global index against a length (`block * dim + x < n`, the sum marked `nuw`
/// or bounded by its operands' widths) cuts the rows at `n - block * dim` on the images
/// without AVX-512, as `x < V` does; not on AVX-512 images, and not for a sum that may wrap.
#[test]
fn a_branch_on_a_global_index_against_a_length_cuts_the_rows() {
    let region = |index: &str| {
        format!(
            "  %block = call i32 @__offload_cpuir_index(i32 3)
  %dim = call i32 @__offload_cpuir_index(i32 6)
  %n = call i32 @__offload_cpuir_index(i32 9)
{index}
  %n64 = zext i32 %n to i64
  %low = icmp ult i64 %i, %n64
  %own = getelementptr i32, ptr %data, i32 %t
  br i1 %low, label %lead, label %rest
lead:
  store i32 %t, ptr %own
  br label %rest
rest:"
        )
    };
    let nuw = "  %base = mul nuw i32 %block, %dim
  %sum = add nuw i32 %base, %t
  %i = zext i32 %sum to i64";
    let widths = "  %block64 = zext i32 %block to i64
  %dim64 = zext i32 %dim to i64
  %base = mul i64 %block64, %dim64
  %t64 = zext i32 %t to i64
  %i = add i64 %base, %t64";
    let wrapping = "  %base = mul i32 %block, %dim
  %sum = add i32 %base, %t
  %i = zext i32 %sum to i64";
    let cuts = |index: &str, shape: ThreadLoops| {
        let body = body_with_region("", "", &region(index));
        let (text, kept) = form_with(&body, shape);
        assert!(kept.is_empty(), "{kept:?}");
        labelled(entry_point(&text), "cut.above")
    };
    assert_eq!(cuts(nuw, ThreadLoops::NARROW), 1);
    assert_eq!(cuts(widths, ThreadLoops::NARROW), 1);
    assert_eq!(cuts(wrapping, ThreadLoops::NARROW), 0);
    assert_eq!(cuts(nuw, ThreadLoops::AVX512), 0);
}

/// A global index tested against a length before a barrier (`let inside = i < n;`) and
/// branched on after it cuts the rows of the region after the barrier, which computes the test
/// again: the region's own test of `x`.
#[test]
fn a_global_index_tested_before_a_barrier_cuts_the_rows_after_it() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %block = call i32 @__offload_cpuir_index(i32 3)
  %dim = call i32 @__offload_cpuir_index(i32 6)
  %n = call i32 @__offload_cpuir_index(i32 9)
  %base = mul nuw i32 %block, %dim
  %sum = add nuw i32 %base, %t
  %i = zext i32 %sum to i64
  %n64 = zext i32 %n to i64
  %inside = icmp ult i64 %i, %n64
  %own = getelementptr i32, ptr %data, i32 %t
  store i32 0, ptr %own
  call void @__offload_cpuir_barrier()
  br i1 %inside, label %lead, label %rest
lead:
  store i32 %t, ptr %own
  br label %rest
rest:
  call void @__offload_cpuir_barrier()
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "cut.above"), 1, "{entry}");
    // The first region's loops, which do not branch on the test, are left whole.
    let first = entry
        .split("\nregion:")
        .nth(1)
        .and_then(|rest| rest.split("\nsummarize:").next())
        .expect("the first region's loops");
    assert!(!first.contains("cut.above"), "{entry}");
}

/// On an image whose masked loads cost what plain ones do ([`ThreadLoops::AVX512`]), a test
/// of a global index cuts the rows where the region's accesses under it would be gathers (a
/// warp's slot, `shared[t >> 5]`; a column, `shared[2 * t]`), whose masked forms cost more
/// than the cut; not where every access is the thread's own element.
#[test]
fn on_avx512_a_global_index_cuts_the_rows_of_regions_that_gather() {
    let region = |address: &str| {
        format!(
            "  %block = call i32 @__offload_cpuir_index(i32 3)
  %dim = call i32 @__offload_cpuir_index(i32 6)
  %n = call i32 @__offload_cpuir_index(i32 9)
  %base = mul nuw i32 %block, %dim
  %sum = add nuw i32 %base, %t
  %low = icmp ult i32 %sum, %n
  %own = getelementptr i32, ptr %data, i32 %t
  br i1 %low, label %lead, label %rest
lead:
{address}
  %slot = getelementptr i32, ptr @shared, i32 %at
  %v = load i32, ptr %slot
  store i32 %v, ptr %own
  br label %rest
rest:"
        )
    };
    let cuts = |address: &str| {
        let body = body_with_region("", "", &region(address));
        let (text, kept) = form_with(&body, ThreadLoops::AVX512);
        assert!(kept.is_empty(), "{kept:?}");
        labelled(entry_point(&text), "cut.above")
    };
    assert_eq!(cuts("  %at = lshr i32 %t, 5"), 1);
    assert_eq!(cuts("  %at = shl i32 %t, 1"), 1);
    assert_eq!(cuts("  %at = add i32 %t, 1"), 0);
}

/// A grid-stride loop as the kernel side writes it: the answer to the CPU link's question
/// chooses between the loop trip by trip for the whole block (the block's first index
/// advanced before a branch on the thread's own index, the top of each trip a place the body
/// is cut at) and each thread's own loop; a barrier after it when `BARRIER` is set.
fn strided_body(barrier: bool) -> String {
    let barrier = if barrier {
        "  call void @__offload_cpuir_barrier()\n"
    } else {
        ""
    };
    format!(
        "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %b = call i32 @__offload_cpuir_index(i32 3)
  %bd = call i32 @__offload_cpuir_index(i32 6)
  %gd = call i32 @__offload_cpuir_index(i32 9)
  %step32 = mul i32 %bd, %gd
  %step = zext i32 %step32 to i64
  %first32 = mul i32 %b, %bd
  %first0 = zext i32 %first32 to i64
  %offset = zext i32 %t to i64
  %interleaved = call i1 @__offload_cpuir_interleaved()
  br i1 %interleaved, label %outer, label %own
outer:
  %first = phi i64 [ %first0, %entry ], [ %next, %body ]
  br label %trip
trip:
  %f = phi i64 [ %first, %outer ], [ %next, %advance ]
  call void @__offload_cpuir_interleave()
  %more = icmp ult i64 %f, 1000000
  br i1 %more, label %advance, label %done
advance:
  %next = add i64 %f, %step
  %i = add i64 %f, %offset
  %in = icmp ult i64 %i, 1000000
  br i1 %in, label %body, label %trip
body:
  %p = getelementptr i32, ptr %data, i64 %i
  store i32 1, ptr %p
  br label %outer
own:
  %start = add i64 %first0, %offset
  br label %own.loop
own.loop:
  %j = phi i64 [ %start, %own ], [ %j.next, %own.body ]
  %own.more = icmp ult i64 %j, 1000000
  br i1 %own.more, label %own.body, label %done
own.body:
  %q = getelementptr i32, ptr %data, i64 %j
  store i32 1, ptr %q
  %j.next = add i64 %j, %step
  br label %own.loop
done:
{barrier}  ret void
}}"
    )
}

/// In a kernel with barriers a grid-stride loop runs trip by trip for the whole block: the
/// top of each trip is cut at like a barrier, the block's first index is kept once per block
/// (stored the same on the way through the thread's element and on the way past it), and
/// the threads leave each trip's region together.
#[test]
fn a_strided_loop_runs_trip_by_trip_where_regions_are_formed() {
    let (text, kept) = form(&strided_body(true));
    assert!(kept.is_empty(), "{kept:?}");
    assert!(
        !text.contains("call i1 @__offload_cpuir_interleaved"),
        "{text}"
    );
    let entry = entry_point(&text);
    assert!(
        !entry.contains("call void @__offload_cpuir_interleave"),
        "{entry}"
    );
    assert!(entry.contains("%block.slot = alloca i64"), "{entry}");
    assert_eq!(regions_left_together(entry), 3, "{entry}");
}

/// Without a barrier the kernel keeps each thread's own loop: the question is answered
/// `false` and the trip-by-trip loop folded away.
#[test]
fn a_strided_loop_without_barriers_stays_each_threads_own() {
    let (text, kept) = form(&strided_body(false));
    assert!(kept.is_empty(), "{kept:?}");
    assert!(!text.contains("@__offload_cpu_irregions_k"), "{text}");
    assert!(
        !text.contains("call i1 @__offload_cpuir_interleaved"),
        "{text}"
    );
    assert!(
        !text.contains("call void @__offload_cpuir_interleave"),
        "{text}"
    );
}

/// The calls of the block barrier hook left in `text`.
fn barrier_calls_in(text: &str) -> usize {
    text.matches("call void @__offload_cpuir_barrier()").count()
}

/// Runs [`merge_alternative_barriers`](super::merge::merge_alternative_barriers) on kernel
/// `k`'s body, no condition computed again after a barrier; returns how many barriers it
/// merged away and the verified module's text.
fn merge_barriers(body: &str) -> (usize, String) {
    merge_barriers_with(body, &mut |_| false)
}

/// [`merge_barriers`] with the conditions `recomputed` accepts computed again.
fn merge_barriers_with(
    body: &str,
    recomputed: &mut dyn FnMut(Value<'_>) -> bool,
) -> (usize, String) {
    let context = inkwell::context::Context::create();
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(
        module_text(body).as_bytes(),
        "test",
    );
    let module = context.create_module_from_ir(buffer).expect("parses");
    let ir = Module::new(&module);
    let hooks = Hooks::find(ir).complete().expect("the hooks");
    let body = ir
        .function(&format!("{}k", abi::CPU_BODY_PREFIX))
        .expect("the body");
    let merged = super::merge::merge_alternative_barriers(ir, body, &hooks, recomputed);
    module
        .verify()
        .unwrap_or_else(|e| panic!("{e}\n{}", module.print_to_string()));
    (merged, module.print_to_string().to_string())
}

/// A barrier LLVM's jump threading copied into both ways of a branch on the thread's own
/// condition (`if first { .. } sync_threads(); if !first { .. }`), the code after each copy
/// its way's own, to the body's end; `%t`, `%data` and `%slot` defined before.
const THREADED_PAIR: &str = "  %first = icmp eq i32 %t, 0
  br i1 %first, label %mine, label %others
mine:
  store i32 7, ptr %data
  call void @__offload_cpuir_barrier()
  br label %join
others:
  call void @__offload_cpuir_barrier()
  %seen = load i32, ptr %data
  %sum = add i32 %seen, %t
  br label %join
join:
  %v = phi i32 [ 0, %mine ], [ %sum, %others ]
  store i32 %v, ptr %slot
  ret void";

/// [`THREADED_PAIR`] as a whole body.
fn threaded_barrier() -> String {
    format!(
        "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %slot = getelementptr i32, ptr %data, i32 %t
{THREADED_PAIR}
}}"
    )
}

#[test]
fn barriers_copied_into_both_ways_of_a_branch_become_one() {
    let threaded = threaded_barrier();
    assert_eq!(barrier_calls_in(&threaded), 2);
    let (merged, text) = merge_barriers(&threaded);
    assert_eq!(merged, 1, "{text}");
    assert_eq!(barrier_calls_in(&text), 1, "{text}");
    // Each thread goes on the way it came: stored before the barrier, switched on after.
    assert!(text.contains("%barrier.way = alloca i32"), "{text}");
    assert!(text.contains("switch i32 %barrier.way"), "{text}");
    // Formed, the kernel keeps no coroutines.
    let (text, kept) = form(&threaded);
    assert!(kept.is_empty(), "{kept:?}");
    assert!(text.contains("@__offload_cpu_irregions_k"), "{text}");
}

/// Where the branch into the two barriers tests the thread's index, the way each thread came
/// is that test again after the barrier: nothing is stored before it, and the formed kernel
/// keeps no lanes (a stored way is each thread's, kept across the barrier). On a condition
/// read from memory the way is stored and kept.
#[test]
fn a_way_the_threads_index_decides_is_tested_again_after_the_barrier() {
    let threaded = threaded_barrier();
    let (text, kept) = form(&threaded);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(lane_slots(entry), 0, "{entry}");
    let (merged, text) = merge_barriers_with(&threaded, &mut |_| true);
    assert_eq!(merged, 1, "{text}");
    assert!(!text.contains("%barrier.way = alloca"), "{text}");
    assert!(
        text.contains("%barrier.way = select i1 %first, i32 0, i32 1"),
        "{text}"
    );
    let read = threaded.replace(
        "  %first = icmp eq i32 %t, 0",
        "  %flag = load i32, ptr %slot\n  %first = icmp eq i32 %flag, 0",
    );
    assert_ne!(read, threaded);
    let (text, kept) = form(&read);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(lane_slots(entry), 1, "{entry}");
}

#[test]
fn barriers_one_after_the_other_or_in_a_loop_stay_apart() {
    let threaded = threaded_barrier();
    let sequential = threaded.replace(
        "  store i32 7, ptr %data\n  call void @__offload_cpuir_barrier()\n  br label %join",
        "  store i32 7, ptr %data\n  call void @__offload_cpuir_barrier()\n  br label %others",
    );
    let sequential = sequential.replace("[ 0, %mine ], ", "");
    assert_ne!(sequential, threaded);
    let (merged, text) = merge_barriers(&sequential);
    assert_eq!(merged, 0, "{text}");
    assert_eq!(barrier_calls_in(&text), 2, "{text}");
    // The loop's two barriers (one on a thread's own way) reach each other around it.
    let divergent_loop = LOOP_BODY.replace(
        "  %next = lshr i32 %half, 1\n  call void @__offload_cpuir_barrier()\n  br label %loop",
        "  %next = lshr i32 %half, 1\n  %mine = icmp ult i32 %t, %half\n  \
         br i1 %mine, label %wait, label %other\nwait:\n  \
         call void @__offload_cpuir_barrier()\n  br label %loop\nother:\n  \
         call void @__offload_cpuir_barrier()\n  br label %loop",
    );
    let divergent_loop =
        divergent_loop.replace("[ %next, %body ]", "[ %next, %wait ], [ %next, %other ]");
    assert_ne!(divergent_loop, LOOP_BODY);
    let (merged, text) = merge_barriers(&divergent_loop);
    assert_eq!(merged, 0, "{text}");
    assert_eq!(barrier_calls_in(&text), 3, "{text}");
}

/// Rodinia's `hotspot` after jump threading: a loop whose trip ends at a barrier every
/// thread reaches, and before it a barrier copied into each way of a branch on the thread's
/// own condition (`if inside { step; } sync_threads()`), each copy going on to the trip's
/// end or, on the last trip, out of the kernel (the copy of the threads that stepped by way
/// of a store of their cell). `%t` is the thread's `x`; the loop is left only on ways that
/// lead out (to a store to global memory and the return).
const STEPPED_LOOP: &str = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %cell = getelementptr i32, ptr %data, i32 %t
  call void @__offload_cpuir_barrier()
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %trip_end ]
  %from = add i32 %i, 1
  %inside = icmp ugt i32 %t, %i
  br i1 %inside, label %step, label %idle
step:
  store i32 %i, ptr %cell
  call void @__offload_cpuir_barrier()
  %last_stepped = icmp eq i32 %i, 3
  br i1 %last_stepped, label %write, label %copy
idle:
  call void @__offload_cpuir_barrier()
  %last_idle = icmp eq i32 %i, 3
  br i1 %last_idle, label %end, label %trip_end
copy:
  store i32 %from, ptr %cell
  br label %trip_end
trip_end:
  %next = add i32 %i, 1
  call void @__offload_cpuir_barrier()
  br label %loop
write:
  %out = getelementptr i32, ptr %data, i32 %from
  store i32 %t, ptr %out
  br label %end
end:
  ret void
}";

/// The two copies of the barrier lead to one another only around the loop, through the
/// trip's last barrier: within a trip they are alternatives, made one. The way each thread
/// came is its own (stored under its own branch, in a loop left only on ways out): a lane
/// of each thread, not a value the block keeps once, beside the counter the block does.
#[test]
fn barriers_copied_into_both_ways_of_a_branch_in_a_loop_become_one() {
    assert_eq!(barrier_calls_in(STEPPED_LOOP), 4);
    let (merged, text) = merge_barriers(STEPPED_LOOP);
    assert_eq!(merged, 1, "{text}");
    assert_eq!(barrier_calls_in(&text), 3, "{text}");
    assert!(text.contains("switch i32 %barrier.way"), "{text}");
    let (text, kept) = form(STEPPED_LOOP);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    let block_slots = entry
        .lines()
        .filter(|l| l.contains("%block.slot") && l.contains("= alloca"))
        .count();
    assert_eq!((block_slots, lane_slots(entry)), (2, 1), "{entry}");
}

/// A loop around a barrier whose counter the block shares, then `tail`, then the end.
fn counted_loop_then(tail: &str) -> String {
    format!(
        "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %n = call i32 @__offload_cpuir_index(i32 6)
  %slot = getelementptr i32, ptr %data, i32 %t
  br label %loop
loop:
  %half = phi i32 [ %n, %entry ], [ %next, %body ]
  %done = icmp ult i32 %half, 2
  br i1 %done, label %after, label %body
body:
  %next = lshr i32 %half, 1
  store i32 %half, ptr %slot
  call void @__offload_cpuir_barrier()
  br label %loop
after:
{tail}
}}"
    )
}

#[test]
fn a_threaded_barrier_after_a_loop_leaves_its_counter_the_blocks() {
    // After the loop, the jump-threaded barrier pair.
    let body = counted_loop_then(THREADED_PAIR);
    let (text, kept) = form(&body);
    assert!(kept.is_empty(), "{kept:?}");
    assert!(
        entry_point(&text).contains("%block.slot = alloca i32"),
        "{text}"
    );
}

/// The first warp's warp operation after the loop (`if warp_id() == 0 { .. }`).
fn first_warp_after_loop() -> String {
    counted_loop_then(
        "  %warp = lshr i32 %t, 5
  %first_warp = icmp eq i32 %warp, 0
  br i1 %first_warp, label %lanes, label %out
lanes:
  call void @__offload_cpuir_warp_barrier()
  br label %out
out:
  ret void",
    )
}

#[test]
fn a_warp_barrier_on_a_threads_own_way_leaves_earlier_counters_the_blocks() {
    let after = first_warp_after_loop();
    let (text, kept) = form(&after);
    assert!(kept.is_empty(), "{kept:?}");
    assert!(
        entry_point(&text).contains("%block.slot = alloca i32"),
        "{text}"
    );
    // Before the loop instead, the counter's first store may run while the first warp still
    // waits at its warp barrier: each thread's own.
    let before = after
        .replace(
            "  %slot = getelementptr i32, ptr %data, i32 %t\n  br label %loop",
            "  %slot = getelementptr i32, ptr %data, i32 %t
  %warp = lshr i32 %t, 5
  %first_warp = icmp eq i32 %warp, 0
  br i1 %first_warp, label %lanes, label %start
lanes:
  call void @__offload_cpuir_warp_barrier()
  br label %start
start:
  br label %loop",
        )
        .replace("[ %n, %entry ]", "[ %n, %start ]")
        .replace(
            "  %warp = lshr i32 %t, 5
  %first_warp = icmp eq i32 %warp, 0
  br i1 %first_warp, label %lanes, label %out
lanes:
  call void @__offload_cpuir_warp_barrier()
  br label %out
out:
  ret void",
            "  ret void",
        );
    assert_ne!(before, after);
    let (text, kept) = form(&before);
    assert!(kept.is_empty(), "{kept:?}");
    assert!(!entry_point(&text).contains("block.slot"), "{text}");
}

/// The guarded loop of a region after a warp barrier tests each warp's states before it runs
/// the warp's threads, as an unguarded loop where all wait there; those after block barriers
/// run every thread they visit as before.
#[test]
fn a_guarded_loop_after_a_warp_barrier_skips_warps_none_of_whose_threads_wait_there() {
    let (text, kept) = form(&first_warp_after_loop());
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(labelled(entry_point(&text), "piece.tested"), 1, "{text}");
    // A warp whose threads all wait there runs them unguarded.
    assert_eq!(labelled(entry_point(&text), "piece.whole"), 1, "{text}");
    let (text, _) = form(LOOP_BODY);
    assert_eq!(labelled(entry_point(&text), "piece"), 0, "{text}");
}

/// Outside a round, the guarded loop after a warp barrier stops its row at the last rank the
/// scheduler's last pass over the states found at a warp barrier; where a guarded loop takes
/// threads from a block barrier to a warp barrier without a pass (threads that returned
/// before the block barrier, the others summing their warp after it), that bound is dropped.
#[test]
fn a_guarded_loop_after_a_warp_barrier_stops_at_the_last_warp_the_scan_found() {
    let dropped = "store i32 -1, ptr %going.first.end";
    let (text, kept) = form(&first_warp_after_loop());
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "piece.live"), 1, "{entry}");
    assert!(entry.contains("%going.first.end"), "{entry}");
    // Set in the entry block only: every shortcut keeps the threads going first.
    assert_eq!(entry.matches(dropped).count(), 1, "{entry}");
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %own = getelementptr i32, ptr %data, i32 %t
  %gone = icmp uge i32 %t, 64
  br i1 %gone, label %out, label %stay
stay:
  call void @__offload_cpuir_barrier()
  store i32 1, ptr %own
  call void @__offload_cpuir_warp_barrier()
  store i32 2, ptr %own
  br label %out
out:
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(entry.matches(dropped).count(), 2, "{entry}");
}

/// The lanes' parts (the states, each per-thread local) get alias scopes: an access to one
/// part says it touches no other, and, where no address into the lanes leaves the entry
/// point's loads and stores, every other access says it touches none of them.
#[test]
fn lane_accesses_are_told_apart_from_each_other_and_the_rest() {
    let (text, _) = form(LOOP_BODY);
    let entry = entry_point(&text);
    let lines: Vec<&str> = entry.lines().collect();
    // The element squared, stored in its lanes and loaded after the barrier.
    assert!(
        lines.iter().any(|l| l.contains("store i32")
            && l.contains("!alias.scope")
            && l.contains("!noalias")),
        "{entry}"
    );
    // The parameters' loads, outside the lanes.
    assert!(
        lines.iter().any(|l| l.contains("load ptr, ptr %1")
            && l.contains("!noalias")
            && !l.contains("!alias.scope")),
        "{entry}"
    );
    assert!(
        text.contains("!\"__offload_cpu_irregions_k lanes\"}"),
        "{text}"
    );
    assert!(
        text.contains("!\"__offload_cpu_irregions_k lanes 1\""),
        "{text}"
    );
}

/// A per-thread local whose address a call takes: an access through any other address may
/// reach it, so only the lanes' own accesses are scoped.
#[test]
fn an_escaping_lane_address_scopes_only_the_lanes_own_accesses() {
    let body = "
declare void @sink(ptr)
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %a = alloca i32
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  store i32 %t, ptr %a
  call void @__offload_cpuir_barrier()
  call void @sink(ptr %a)
  %v = load i32, ptr %a
  %out = getelementptr i32, ptr %data, i32 %t
  store i32 %v, ptr %out
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(entry.contains("call void @sink"), "{entry}");
    assert!(entry.contains("!alias.scope"), "{entry}");
    assert!(
        !entry
            .lines()
            .any(|l| l.contains("!noalias") && !l.contains("!alias.scope")),
        "{entry}"
    );
}

/// The loops over `x` of the regions every thread runs are marked parallel: an access group
/// on each memory access, `llvm.loop.parallel_accesses` on the loop.
#[test]
fn thread_loops_are_marked_parallel() {
    let (text, _) = form(LOOP_BODY);
    let entry = entry_point(&text);
    let marked = entry.matches(", !llvm.loop !").count();
    assert!(marked >= 2, "{entry}");
    assert!(text.contains("!\"llvm.loop.parallel_accesses\""), "{text}");
    // The output's store, in the region after the loop, is in the group.
    assert!(
        entry
            .lines()
            .any(|l| l.contains("store i32") && l.contains("!llvm.access.group")),
        "{entry}"
    );
    // The guarded loops (threads at one of several barriers) are not marked.
    let loops = entry.matches("label %x").count();
    assert!(marked < loops, "{entry}");
    // Every thread loop runs one vector a trip (a block's row of 16 threads is not left to
    // the scalar remainder of vectors four times as wide).
    let one_at_a_time = loop_ids_with(&text, "!\"llvm.loop.interleave.count\", i32 1}");
    assert_eq!(one_at_a_time.len(), marked, "{text}");
}

/// For an image whose masked stores cost what plain ones do ([`ThreadLoops::AVX512`]), every
/// thread loop says LLVM peeled it as far as LLVM peels, but for one holding an atomic
/// read-modify-write, which LLVM vectorizes in no case and whose guarded thread peeling takes
/// out of it, and runs two vectors a trip. Elsewhere LLVM peels where it finds that worth it,
/// one vector a trip.
#[test]
fn thread_loops_are_left_unpeeled_where_masked_stores_are_cheap() {
    const UNPEELED: &str = "!\"llvm.loop.peeled.count\", i32 2147483647}";
    const TWO_A_TRIP: &str = "!\"llvm.loop.interleave.count\", i32 2}";
    let (text, _) = form_with(LOOP_BODY, ThreadLoops::AVX512);
    let marked = entry_point(&text).matches(", !llvm.loop !").count();
    assert!(marked >= 2, "{text}");
    assert_eq!(loop_ids_with(&text, UNPEELED).len(), marked, "{text}");
    assert_eq!(loop_ids_with(&text, TWO_A_TRIP).len(), marked, "{text}");
    let (text, _) = form(LOOP_BODY);
    assert!(!text.contains("llvm.loop.peeled.count"), "{text}");
    assert!(loop_ids_with(&text, TWO_A_TRIP).is_empty(), "{text}");

    let atomic = body_with_region("", "", "  %old = atomicrmw add ptr %data, i32 1 monotonic");
    let (text, _) = form_with(&atomic, ThreadLoops::AVX512);
    let entry = entry_point(&text);
    let unpeeled = loop_ids_with(&text, UNPEELED);
    let holding_the_atomic: Vec<&str> = entry
        .split(", !llvm.loop ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|id| !unpeeled.iter().any(|u| u == id))
        .collect();
    assert_eq!(holding_the_atomic.len(), 1, "{text}");
    assert!(entry.matches(", !llvm.loop !").count() > 1, "{text}");
}

/// A region whose accesses that vary with the thread all vary otherwise than by sums and
/// constant multiples of its index (a Blelloch scan's tree level: `offset * (2 * t + 1) - 1`,
/// `offset` the block's) is kept scalar; one with an access at `t` itself beside them (a
/// bitonic sort's `shared[t]` and `shared[t ^ j]`) is vectorized as the others.
#[test]
fn a_region_whose_accesses_would_all_be_gathers_stays_scalar() {
    let tree = body_with_region(
        "",
        "",
        "  %offset = call i32 @__offload_cpuir_index(i32 6)
  %twice = shl i32 %t, 1
  %odd = or i32 %twice, 1
  %scaled = mul i32 %odd, %offset
  %ai = sub i32 %scaled, 1
  %a = getelementptr i32, ptr @shared, i32 %ai
  %bi = add i32 %ai, %offset
  %b = getelementptr i32, ptr @shared, i32 %bi
  %va = load i32, ptr %a
  %vb = load i32, ptr %b
  %sum = add i32 %va, %vb
  store i32 %sum, ptr %b",
    );
    let (text, kept) = form(&tree);
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(loop_ids_with(&text, SCALAR).len(), 1, "{text}");
    let partner = body_with_region(
        "",
        "",
        "  %j = xor i32 %t, 1
  %mine = getelementptr i32, ptr @shared, i32 %t
  %theirs = getelementptr i32, ptr @shared, i32 %j
  %v = load i32, ptr %theirs
  store i32 %v, ptr %mine",
    );
    let (text, _) = form(&partner);
    assert!(loop_ids_with(&text, SCALAR).is_empty(), "{text}");
    let alone = partner.replace("store i32 %v, ptr %mine", "store i32 %v, ptr %theirs");
    let (text, _) = form(&alone);
    assert_eq!(loop_ids_with(&text, SCALAR).len(), 1, "{text}");
}

/// A region that stores on every trip at an address that varies with the thread otherwise
/// than affinely (a slot padded every 8 words, `t + (t >> 3)`) is kept scalar although it
/// also loads at `t`: as vectors, a scatter on every trip. The same store under a test that
/// varies with the thread (a warp's last lane) leaves the region vectorized.
#[test]
fn a_region_that_would_scatter_on_every_trip_stays_scalar() {
    let (text, kept) = form(&padded_copy(0, 3));
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(loop_ids_with(&text, SCALAR).len(), 1, "{text}");
    let tested = body_with_region(
        "",
        "",
        "  %from = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %from
  %lane = and i32 %t, 31
  %last = icmp eq i32 %lane, 31
  br i1 %last, label %store, label %after
store:
  %warp = lshr i32 %t, 5
  %to = getelementptr i32, ptr @shared, i32 %warp
  store i32 %v, ptr %to
  br label %after
after:",
    );
    let (text, kept) = form(&tested);
    assert!(kept.is_empty(), "{kept:?}");
    assert!(loop_ids_with(&text, SCALAR).is_empty(), "{text}");
}

/// A region that asks for its thread's warp (`rank >> 5`, or `(x + 512) >> 5` of a Blelloch
/// scan's padded slot) runs its rows a warp at a time, the warp one value for each loop: no
/// `>> 5` of a thread's index is left in that loop (the guarded loop, for threads at one of
/// several barriers, keeps its). The warp's last lane storing the warp's
/// total to the warp's word runs alone, on either shape of loops. A shift that is not a
/// warp's (`rank >> 4`) leaves the rows whole.
#[test]
fn a_region_that_asks_for_its_warp_runs_a_warp_at_a_time() {
    let total = |shift: u32| {
        body_with_region(
            "",
            "",
            &format!(
                "  %rank = call i32 @__offload_cpuir_index(i32 12)
  %from = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %from
  %lane = and i32 %rank, 31
  %last = icmp eq i32 %lane, 31
  br i1 %last, label %store, label %after
store:
  %warp = lshr i32 %rank, {shift}
  %to = getelementptr i32, ptr @shared, i32 %warp
  store i32 %v, ptr %to
  br label %after
after:"
            ),
        )
    };
    // The lines of the loop over the warps, from its head to the next region's start.
    let loop_of_warps = |entry: &str| -> Vec<String> {
        let mut lines = entry.lines().skip_while(|l| !l.starts_with("warp:"));
        let head = lines.next().map(str::to_owned);
        head.into_iter()
            .chain(
                lines
                    .take_while(|l| !l.starts_with("region"))
                    .map(str::to_owned),
            )
            .collect()
    };
    let shifted_index = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("= lshr") && !l.contains("%warp"))
            .count()
    };
    for shape in [ThreadLoops::AVX512, ThreadLoops::NARROW] {
        let (text, kept) = form_with(&total(5), shape);
        assert!(kept.is_empty(), "{kept:?}");
        let entry = entry_point(&text);
        assert!(labelled(entry, "warp") >= 1, "{entry}");
        assert!(labelled(entry, "single.go") >= 1, "{entry}");
        let warps = loop_of_warps(entry);
        assert!(warps.iter().any(|l| l.contains("store")), "{entry}");
        assert_eq!(shifted_index(&warps), 0, "{entry}");
        let (text, kept) = form_with(&total(4), shape);
        assert!(kept.is_empty(), "{kept:?}");
        let entry = entry_point(&text);
        assert_eq!(labelled(entry, "warp"), 0, "{entry}");
    }
    let (text, kept) = form(&padded_copy(512, 5));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    let warps = loop_of_warps(entry);
    assert!(warps.iter().any(|l| l.contains("store")), "{entry}");
    assert_eq!(shifted_index(&warps), 0, "{entry}");
    assert!(loop_ids_with(&text, SCALAR).is_empty(), "{text}");
}

/// A warp operation's read of its warp's slots: the warp's first rank (`rank & -32`, as
/// `rank - rank % 32` folds) and the warp's lanes (`min(threads - first, 32)`) are one value
/// for each loop over a warp's threads, not a mask of each thread's rank, in an image without
/// AVX-512 (whose loops take a warp in one trip: the rows stay whole); a mask that is not a
/// warp's (`rank & -16`) leaves the rows whole.
#[test]
fn a_warps_first_lane_is_one_value_for_a_loop_over_the_warp() {
    let shuffle_down = |mask: i32| {
        body_with_region(
            "",
            "",
            &format!(
                "  %rank = call i32 @__offload_cpuir_index(i32 12)
  %threads = call i32 @__offload_cpuir_index(i32 6)
  %first = and i32 %rank, {mask}
  %left = sub i32 %threads, %first
  %lanes = call i32 @llvm.umin.i32(i32 %left, i32 32)
  %lane = sub i32 %rank, %first
  %after = sub i32 %lanes, %lane
  %inside = icmp ugt i32 %after, 16
  %near = add i32 %rank, 16
  %from = getelementptr i32, ptr %data, i32 %near
  %other = load i32, ptr %from
  %own = getelementptr i32, ptr %data, i32 %rank
  %mine = load i32, ptr %own
  %v = select i1 %inside, i32 %other, i32 %mine
  %to = getelementptr i32, ptr @shared, i32 %t
  store i32 %v, ptr %to"
            ),
        )
    };
    let masks_of_rank = |lines: &[&str], mask: i32| {
        lines
            .iter()
            .filter(|l| l.contains("= and i32") && l.ends_with(&format!(", {mask}")))
            .count()
    };
    let (text, kept) = form_with(&shuffle_down(-32), ThreadLoops::AVX512);
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(labelled(entry_point(&text), "warp"), 0, "{text}");
    for shape in [ThreadLoops::AVX512, ThreadLoops::NARROW] {
        let (text, kept) = form_with(&shuffle_down(-16), shape);
        assert!(kept.is_empty(), "{kept:?}");
        let entry = entry_point(&text);
        assert_eq!(labelled(entry, "warp"), 0, "{entry}");
        let lines: Vec<&str> = entry.lines().collect();
        assert!(masks_of_rank(&lines, -16) >= 1, "{entry}");
    }
    let (text, kept) = form_with(&shuffle_down(-32), ThreadLoops::NARROW);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(labelled(entry, "warp") >= 1, "{entry}");
    // The loop over the warps, from its head to the next region's start (the guarded
    // loop, for threads at one of several barriers, keeps its mask).
    let warps: Vec<&str> = entry
        .lines()
        .skip_while(|l| !l.starts_with("warp:"))
        .take_while(|l| !l.starts_with("region"))
        .collect();
    assert_eq!(masks_of_rank(&warps, -32), 0, "{entry}");
    assert!(
        warps.iter().any(|l| l.contains("%first.lane = shl")),
        "{entry}"
    );
}

/// The pieces of the entry point `entry`'s unguarded loops: each `piece` block with the blocks
/// of its thread loop after it (`x`, `x.latch`, `go` and the region's copy, `r`).
fn pieces(entry: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in entry.lines() {
        if let Some((label, _)) = line.split_once(':').filter(|_| !line.starts_with(' ')) {
            let name = label.trim_end_matches(|c: char| c.is_ascii_digit());
            if name == "piece" || !["x", "x.latch", "go", "r"].contains(&name) {
                pieces.extend(current.take());
            }
            if name == "piece" {
                current = Some(String::new());
            }
        }
        if let Some(piece) = &mut current {
            piece.push_str(line);
            piece.push('\n');
        }
    }
    pieces.extend(current);
    pieces
}

/// Rodinia `hotspot`'s range check written as `IN_RANGE` negated (`x < lo || x > hi` leaves
/// the thread out) and its clamped neighbours (`max(x - 1, lo)`, `min(hi, x + 1)`, either
/// operand first), `lo` and `hi` the block's: the rows are cut at the largest lower cut and
/// the smallest upper one, and the piece between knows every comparison and clamp, so that
/// its copy of the region keeps neither (its loads are of `x - 1` and `x + 1`, no gathers).
#[test]
fn a_range_check_and_clamped_neighbours_leave_the_middle_piece() {
    let region = "  %lo = call i32 @__offload_cpuir_index(i32 3)
  %hi = call i32 @__offload_cpuir_index(i32 9)
  %below = icmp slt i32 %t, %lo
  %above = icmp sgt i32 %t, %hi
  %out = or i1 %below, %above
  br i1 %out, label %rest, label %work
work:
  %w1 = add i32 %t, -1
  %west = call i32 @llvm.smax.i32(i32 %w1, i32 %lo)
  %e1 = add i32 %t, 1
  %east = call i32 @llvm.smin.i32(i32 %hi, i32 %e1)
  %wp = getelementptr i32, ptr @shared, i32 %west
  %ep = getelementptr i32, ptr @shared, i32 %east
  %a = load i32, ptr %wp
  %b = load i32, ptr %ep
  %sum = add i32 %a, %b
  %own = getelementptr i32, ptr %data, i32 %t
  store i32 %sum, ptr %own
  br label %rest
rest:";
    let declarations = "declare i32 @llvm.smax.i32(i32, i32)\ndeclare i32 @llvm.smin.i32(i32, i32)";
    for shape in [ThreadLoops::AVX512, ThreadLoops::NARROW] {
        let (text, kept) = form_with(&body_with_region(declarations, "", region), shape);
        assert!(kept.is_empty(), "{kept:?}");
        let entry = entry_point(&text);
        assert_eq!(labelled(entry, "cut.above"), 2, "{entry}");
        let pieces = pieces(entry);
        let decided = |piece: &&String| {
            piece.contains("store i32")
                && !piece.contains("@llvm.smax")
                && !piece.contains("@llvm.smin")
                && !piece.contains("icmp s")
        };
        assert_eq!(pieces.iter().filter(decided).count(), 1, "{entry}");
        // The pieces before and after it keep what they cannot know.
        assert!(pieces.iter().any(|p| p.contains("@llvm.smin")), "{entry}");
    }
}

/// Comparisons of `x` with two constants (`t < 64`, `t < 16`, as `kmeans` clears its sums and
/// counts) cut the rows at both, in ascending order, and every piece knows both answers: no
/// loop of the unguarded region tests either.
#[test]
fn constant_bounds_cut_the_rows_in_ascending_order() {
    let region = "  %own = getelementptr i32, ptr %data, i32 %t
  %wide = icmp ult i32 %t, 64
  br i1 %wide, label %first, label %next
first:
  store i32 1, ptr %own
  br label %next
next:
  %narrow = icmp ult i32 %t, 16
  br i1 %narrow, label %second, label %rest
second:
  %slot = getelementptr i32, ptr @shared, i32 %t
  store i32 2, ptr %slot
  br label %rest
rest:";
    let (text, kept) = form(&body_with_region("", "", region));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "cut.above"), 2, "{entry}");
    let pieces = pieces(entry);
    assert_eq!(pieces.len(), 3, "{entry}");
    for piece in &pieces {
        assert!(!piece.contains("icmp ult i32 %x"), "{piece}");
    }
}

/// A signed comparison of a global index `x + C` (`C` the block's, perhaps negative: a tile
/// with a halo) cuts the rows at `V - C`, where no `x` of the row carries `x + C` past the
/// largest `i32`, tested as the row runs; with a constant `C` (a neighbour's `x + 1`), that
/// needs no test.
#[test]
fn a_signed_global_index_cuts_the_rows_unless_it_wraps() {
    let region = |offset: &str| {
        format!(
            "  %block = call i32 @__offload_cpuir_index(i32 3)
  %n = call i32 @__offload_cpuir_index(i32 9)
  %start = mul i32 %block, 14
  %base = add i32 %start, -1
  %g = add i32 %t, {offset}
  %inside = icmp slt i32 %g, %n
  br i1 %inside, label %work, label %rest
work:
  %own = getelementptr i32, ptr %data, i32 %t
  store i32 %g, ptr %own
  br label %rest
rest:"
        )
    };
    let (text, kept) = form(&body_with_region("", "", &region("%base")));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(labelled(entry, "cut.above") >= 1, "{entry}");
    assert!(entry.contains("%wraps = icmp sgt i64"), "{entry}");
    let (text, kept) = form(&body_with_region("", "", &region("1")));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert_eq!(labelled(entry, "cut.above"), 1, "{entry}");
    assert!(!entry.contains("wraps"), "{entry}");
}

/// A pyramid of steps (Rodinia `hotspot`): a loop around barriers whose counter `i` the block
/// keeps, each trip testing `i < x <= 14 - i`. The first trip's region knows `i = 0` (stored
/// before it reads it), the later trips' regions read `i` as the block left it at the barrier:
/// each computes its cuts from that once per row, and has a piece that knows both answers.
#[test]
fn a_counter_the_block_keeps_across_barriers_cuts_the_rows() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  call void @__offload_cpuir_barrier()
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %step_end ]
  %hi = sub i32 14, %i
  %above = icmp sgt i32 %t, %i
  %below = icmp sle i32 %t, %hi
  %inside = and i1 %above, %below
  br i1 %inside, label %work, label %step_end
work:
  %own = getelementptr i32, ptr %data, i32 %t
  store i32 %i, ptr %own
  br label %step_end
step_end:
  %next = add i32 %i, 1
  call void @__offload_cpuir_barrier()
  %again = icmp slt i32 %next, 4
  br i1 %again, label %loop, label %end
end:
  ret void
}";
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(
        entry.contains("%at.entry = load i32, ptr %block.slot"),
        "{entry}"
    );
    let knows_both = |piece: &&String| piece.contains("store i32") && !piece.contains("icmp s");
    assert!(
        pieces(entry).iter().filter(knows_both).count() >= 2,
        "{entry}"
    );
}

/// A barrier copied into both ways of a branch on a test of `x` (as jump threading leaves
/// `if inside { .. } sync_threads(); if inside { .. }`) is merged into one, after which the
/// test, computed again, selects the way a `switch` takes: it cuts the rows after the barrier
/// as a branch on it does, and no piece tests it.
#[test]
fn a_test_of_x_a_merged_barriers_switch_reads_cuts_the_rows() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %lo = call i32 @__offload_cpuir_index(i32 3)
  %own = getelementptr i32, ptr %data, i32 %t
  %in = icmp ult i32 %t, %lo
  br i1 %in, label %a, label %b
a:
  store i32 %t, ptr %own
  call void @__offload_cpuir_barrier()
  store i32 1, ptr %own
  br label %end
b:
  call void @__offload_cpuir_barrier()
  store i32 0, ptr %own
  br label %end
end:
  call void @__offload_cpuir_barrier()
  ret void
}";
    let (merged, text) = merge_barriers(body);
    assert_eq!(merged, 1, "{text}");
    assert!(text.contains("switch i32 %barrier.way"), "{text}");
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(labelled(entry, "cut.above") >= 1, "{entry}");
}

/// A bound computed under a test the block shares (`if lo < 8 { if t < 7 - lo { .. } }`, the
/// subtraction `nuw`, poison past the test): the row computes its cut whatever the test says,
/// so it cuts at the bound frozen, never branching on poison.
#[test]
fn a_bound_computed_under_a_test_is_frozen_before_the_row_cuts_at_it() {
    let region = "  %lo = call i32 @__offload_cpuir_index(i32 3)
  %own = getelementptr i32, ptr %data, i32 %t
  %small = icmp ult i32 %lo, 8
  br i1 %small, label %guarded, label %rest
guarded:
  %hi = sub nuw i32 7, %lo
  %in = icmp ult i32 %t, %hi
  br i1 %in, label %work, label %other
work:
  store i32 %t, ptr %own
  br label %rest
other:
  store i32 0, ptr %own
  br label %rest
rest:";
    let (text, kept) = form(&body_with_region("", "", region));
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(labelled(entry, "cut.above") >= 1, "{entry}");
    let hoisted = entry
        .lines()
        .find(|l| l.contains("= sub nuw i32 7,"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no hoisted bound: {entry}"));
    assert!(entry.contains(&format!("freeze i32 {hoisted}")), "{entry}");
}

/// A thread loop's property that keeps it scalar.
const SCALAR: &str = "!\"llvm.loop.vectorize.enable\", i32 0}";

/// The body of kernel `k` whose region copies `data[t]` to `@shared[i + (i >> shift)]`, `i`
/// the thread's `x` plus `plus`: a slot padded every `2^shift` words.
fn padded_copy(plus: u32, shift: u32) -> String {
    body_with_region(
        "",
        "",
        &format!(
            "  %from = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %from
  %i = add i32 %t, {plus}
  %pad = lshr i32 %i, {shift}
  %slot = add i32 %i, %pad
  %to = getelementptr i32, ptr @shared, i32 %slot
  store i32 %v, ptr %to"
        ),
    )
}

/// The body of kernel `k` with `region` (its instructions, given `%t`, the thread's `x`
/// index, `%data`, the kernel's buffer, and `%shared`, a block-wide array) between two
/// barriers.
fn body_with_region(declarations: &str, locals: &str, region: &str) -> String {
    format!(
        "
@shared = internal global [64 x i32] zeroinitializer
{declarations}
define void @__offload_cpu_body_k(ptr %params) {{
entry:
{locals}
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  call void @__offload_cpuir_barrier()
{region}
  call void @__offload_cpuir_barrier()
  ret void
}}"
    )
}

/// The loop ids of `text` (`!N = distinct !{!N, ...}`) that name the metadata node `property`
/// (`!"llvm.loop.parallel_accesses"`, say): their `!N`s.
fn loop_ids_with(text: &str, property: &str) -> Vec<String> {
    let named: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(property))
        .filter_map(|l| l.split(" = ").next())
        .collect();
    text.lines()
        .filter_map(|l| {
            let (id, node) = l.split_once(" = distinct !{")?;
            let refers = node
                .split(", ")
                .any(|part| named.contains(&part.trim_end_matches('}')));
            (node.starts_with(&format!("{id},")) && refers).then(|| id.to_owned())
        })
        .collect()
}

/// The number of loops marked parallel in the entry point of `body`.
fn parallel_loops(body: &str) -> usize {
    let (text, kept) = form(body);
    assert!(kept.is_empty(), "{kept:?}");
    let parallel = loop_ids_with(&text, "!\"llvm.loop.parallel_accesses\"");
    entry_point(&text)
        .lines()
        .filter(|l| {
            l.split(", !llvm.loop ")
                .nth(1)
                .is_some_and(|id| parallel.iter().any(|p| id.starts_with(p.as_str())))
        })
        .count()
}

/// A region whose threads store beside one another is parallel, and so is one that adds to a
/// word of global memory atomically (LLVM vectorizes no loop holding the atomic, but the
/// versions of it unswitched away from the atomic); one that loads a word atomically (which
/// LLVM would widen), adds to a word where the atomic becomes plain code (which the threads
/// run in turn), uses a local array of the entry point by a thread's index, or calls a
/// function is not.
#[test]
fn only_regions_whose_threads_run_in_no_order_are_parallel() {
    let halo = body_with_region(
        "",
        "",
        "  %s = getelementptr i32, ptr @shared, i32 %t
  store i32 %t, ptr %s
  %s1 = getelementptr i32, ptr %s, i32 1
  store i32 0, ptr %s1",
    );
    let base = parallel_loops(&halo);
    assert!(base >= 1);
    let atomic = body_with_region(
        "",
        "",
        "  %old = atomicrmw add ptr @shared, i32 1 monotonic",
    );
    assert_eq!(parallel_loops(&atomic), base);
    let (text, _) = form(&atomic);
    assert!(
        entry_point(&text)
            .lines()
            .any(|l| l.contains("atomicrmw add") && l.contains("!llvm.access.group")),
        "{text}"
    );
    let atomic_load = body_with_region(
        "",
        "",
        "  %v = load atomic i32, ptr @shared monotonic, align 4
  %o = getelementptr i32, ptr %data, i32 %t
  store i32 %v, ptr %o",
    );
    assert_eq!(parallel_loops(&atomic_load), base - 1);
    // On memory only the block's OS thread reaches, an atomic becomes plain code, which the
    // threads still run in turn.
    let plain_atomic = body_with_region(
        "",
        "  %count = alloca i32",
        "  %old = atomicrmw add ptr %count, i32 1 monotonic
  %o = getelementptr i32, ptr %data, i32 %t
  store i32 %old, ptr %o",
    );
    let (text, _) = form(&plain_atomic);
    assert!(!entry_point(&text).contains("atomicrmw"), "{text}");
    assert_eq!(parallel_loops(&plain_atomic), base - 1);
    let local_array = body_with_region(
        "declare void @llvm.lifetime.start.p0(ptr)",
        "  %a = alloca [4 x i32]",
        "  call void @llvm.lifetime.start.p0(ptr %a)
  %i = and i32 %t, 3
  %e = getelementptr i32, ptr %a, i32 %i
  store i32 %t, ptr %e
  %v = load i32, ptr %a
  %o = getelementptr i32, ptr %data, i32 %t
  store i32 %v, ptr %o",
    );
    assert_eq!(parallel_loops(&local_array), base - 1);
    let call = body_with_region("declare void @sink(i32)", "", "  call void @sink(i32 %t)");
    assert_eq!(parallel_loops(&call), base - 1);
}

/// A warp scan's loop, its names suffixed `n`: `delta` doubling to the warp's width from
/// block `%from`, a warp operation each trip (its turn, the warp barrier, a read of the
/// turn's half after it), then block `%exit`.
fn warp_scan_loop(n: &str, from: &str, exit: &str) -> String {
    format!(
        "  br label %loop{n}
loop{n}:
  %delta{n} = phi i32 [ 1, %{from} ], [ %next{n}, %body{n} ]
  %done{n} = icmp uge i32 %delta{n}, 32
  br i1 %done{n}, label %{exit}, label %body{n}
body{n}:
  %turn{n} = call i32 @__offload_cpuir_warp_turn(i32 %t)
  %half{n} = mul i32 %turn{n}, 1024
  %mine{n} = add i32 %half{n}, %t
  %put{n} = getelementptr i32, ptr %data, i32 %mine{n}
  store i32 %delta{n}, ptr %put{n}
  call void @__offload_cpuir_warp_barrier()
  %from{n} = sub i32 %mine{n}, %delta{n}
  %get{n} = getelementptr i32, ptr %data, i32 %from{n}
  %v{n} = load i32, ptr %get{n}
  store i32 %v{n}, ptr %own
  %next{n} = shl i32 %delta{n}, 1
  br label %loop{n}
"
    )
}

/// [`warp_scan_loop`] at the body's start, then `tail`.
fn warp_scan_then(tail: &str) -> String {
    format!(
        "
define void @__offload_cpu_body_k(ptr %params) {{
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %own = getelementptr i32, ptr %data, i32 %t
{}after:
{tail}
}}",
        warp_scan_loop("", "entry", "after")
    )
}

/// The turn of warp operations every thread takes alike is the block's: no lane holds it,
/// and the hook is called no more. Taken on a thread's own way, it is each thread's own,
/// until a block barrier, after which every thread's turn is 0 again.
#[test]
fn warp_turns_every_thread_takes_alike_are_the_blocks() {
    let scan = warp_scan_then("  ret void");
    let (text, kept) = form(&scan);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(!entry.contains("@__offload_cpuir_warp_turn"), "{entry}");
    // As a turn computed from the block's own counter.
    let (uniform, _) = form(&scan.replace(
        "  %turn = call i32 @__offload_cpuir_warp_turn(i32 %t)",
        "  %turn = and i32 %delta, 1",
    ));
    assert_eq!(
        lane_slots(entry),
        lane_slots(entry_point(&uniform)),
        "{entry}"
    );

    // One more warp operation on the first warp's way, then the scan again: the turns the
    // scan takes differ between the warps, each thread's own.
    let first_warp_then = |between: &str| {
        warp_scan_then(&format!(
            "  %first = icmp ult i32 %t, 32
  br i1 %first, label %lanes, label %joined
lanes:
  %extra = call i32 @__offload_cpuir_warp_turn(i32 %t)
  call void @__offload_cpuir_warp_barrier()
  br label %joined
joined:
{between}{}end:
  ret void",
            warp_scan_loop("2", "joined", "end")
        ))
    };
    let (diverged, _) = form(&first_warp_then(""));
    let (reset, _) = form(&first_warp_then("  call void @__offload_cpuir_barrier()\n"));
    assert!(
        lane_slots(entry_point(&diverged)) > lane_slots(entry_point(&reset)),
        "{diverged}\n{reset}"
    );
}

/// [`TREE_BODY`] after an `if t == C { .. }` whose join LLVM gave a phi of `C` from that
/// branch and `t` otherwise (a scan's down-sweep after `if thid == 0`), the levels' bound
/// tested on the phi.
fn tree_after_thread_test(tested: u32, restated: u32) -> String {
    TREE_BODY
        .replace(
            "  br label %loop\nloop:\n  %s = phi i32 [ %n, %entry ]",
            &format!(
                "  %first = icmp eq i32 %t, {tested}
  br i1 %first, label %only, label %joined
only:
  store i32 1, ptr %data
  br label %joined
joined:
  %tid = phi i32 [ {restated}, %only ], [ %t, %entry ]
  br label %loop
loop:
  %s = phi i32 [ %n, %joined ]"
            ),
        )
        .replace(
            "%in = icmp ult i32 %t, %half",
            "%in = icmp ult i32 %tid, %half",
        )
        .replace(
            "%slot = getelementptr i32, ptr %data, i32 %t",
            "%slot = getelementptr i32, ptr %data, i32 %tid",
        )
        .replace("%far = add i32 %t, %half", "%far = add i32 %tid, %half")
}

/// The phi restating the thread's index is the index again, and the levels are trimmed as in
/// [`threads_past_a_bound_that_only_wait_are_not_run`]; a phi of another value than the one
/// tested stays, and so do the levels' loops over every thread.
#[test]
fn a_phi_restating_the_threads_index_is_the_index() {
    let restating = tree_after_thread_test(0, 0);
    let (text, kept) = form(&restating);
    assert!(kept.is_empty(), "{kept:?}");
    let entry = entry_point(&text);
    assert!(!entry.contains("%tid"), "{entry}");
    assert_eq!(trimmed_regions(entry), 1, "{entry}");
    let (text, kept) = form(&tree_after_thread_test(1, 0));
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(trimmed_regions(entry_point(&text)), 0, "{text}");
}

/// The dominator tree of a body with a diamond inside a loop: the branch decides which way a
/// thread came only where each way's block is entered from it alone.
#[test]
fn a_branch_decides_the_way_only_where_each_way_is_entered_from_it_alone() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %t = call i32 @__offload_cpuir_index(i32 0)
  %c = icmp ult i32 %t, 4
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %join ]
  br i1 %c, label %left, label %right
left:
  br label %left.end
left.end:
  br label %join
right:
  br label %join
join:
  %i.next = add i32 %i, 1
  %more = icmp ult i32 %i.next, 8
  br i1 %more, label %loop, label %exit
exit:
  ret void
}";
    let context = inkwell::context::Context::create();
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(
        module_text(body).as_bytes(),
        "test",
    );
    let module = context.create_module_from_ir(buffer).expect("parses");
    let ir = Module::new(&module);
    let body = ir
        .function(&format!("{}k", abi::CPU_BODY_PREFIX))
        .expect("the body");
    let block = |name: &str| {
        body.blocks()
            .find(|b| b.as_value().name() == name.as_bytes())
            .expect("the block")
    };
    let dominators = super::dominators::Dominators::of(body);
    let [entry, looped, left, left_end, right, join, exit] =
        ["entry", "loop", "left", "left.end", "right", "join", "exit"].map(block);
    assert!(dominators.dominates(entry, exit));
    assert!(dominators.dominates(looped, join));
    assert!(dominators.dominates(left, left_end));
    assert!(!dominators.dominates(left, join));
    assert!(!dominators.dominates(join, looped));
    let (condition, true_to_first) = dominators
        .deciding_branch([left_end, right])
        .expect("the loop's branch decides");
    assert_eq!(condition.name(), b"c");
    assert!(true_to_first);
    assert_eq!(
        dominators
            .deciding_branch([right, left_end])
            .map(|(_, t)| t),
        Some(false)
    );
    // `join` is entered from both ways: a block past it is no way's alone.
    assert!(dominators.deciding_branch([join, right]).is_none());
}

/// Two merged pairs, the second's branch after a barrier of the first in its block: merging
/// the first moves that branch's condition (copied, the original erased), so the second pair
/// stores its way; the first tests its condition again.
#[test]
fn a_way_whose_condition_an_earlier_merge_moves_is_stored() {
    let body = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %t = call i32 @__offload_cpuir_index(i32 0)
  %first = icmp eq i32 %t, 0
  br i1 %first, label %mine, label %others
mine:
  call void @__offload_cpuir_barrier()
  %low = icmp ult i32 %t, 5
  br i1 %low, label %below, label %above
others:
  call void @__offload_cpuir_barrier()
  ret void
below:
  call void @__offload_cpuir_barrier()
  store i32 1, ptr %data
  ret void
above:
  call void @__offload_cpuir_barrier()
  store i32 2, ptr %data
  ret void
}";
    let (merged, text) = merge_barriers_with(body, &mut |_| true);
    assert_eq!(merged, 2, "{text}");
    assert_eq!(barrier_calls_in(&text), 2, "{text}");
    assert!(
        text.contains("%barrier.way = select i1 %first, i32 0, i32 1"),
        "{text}"
    );
    let stored_way =
        |l: &str| l.trim_start().starts_with("%barrier.way") && l.contains("alloca i32");
    assert_eq!(text.lines().filter(|l| stored_way(l)).count(), 1, "{text}");
    assert_eq!(
        text.matches("store i32 0, ptr %barrier.way").count(),
        1,
        "{text}"
    );
}

/// A tile's shape: each row of threads reads its own row of two matrices (4096 floats a row)
/// and writes one, at the block's `x` index, with a halo row read by the block's first row
/// alone.
const TILE_BODY: &str = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %pp.more = getelementptr i8, ptr %params, i64 8
  %p.more = load ptr, ptr %pp.more
  %more = load ptr, ptr %p.more
  %tx = call i32 @__offload_cpuir_index(i32 0)
  %ty = call i32 @__offload_cpuir_index(i32 1)
  %bx = call i32 @__offload_cpuir_index(i32 3)
  %dx = call i32 @__offload_cpuir_index(i32 6)
  %col0 = mul i32 %bx, %dx
  %col = add i32 %col0, %tx
  %line = mul i32 %ty, 4096
  %g = add i32 %line, %col
  %at = getelementptr float, ptr %data, i32 %g
  %v = load float, ptr %at
  %left = add i32 %g, -1
  %at.left = getelementptr float, ptr %data, i32 %left
  %w = load float, ptr %at.left
  %at.more = getelementptr float, ptr %more, i32 %g
  %m = load float, ptr %at.more
  %top = icmp eq i32 %ty, 0
  br i1 %top, label %halo, label %tile
halo:
  %above = add i32 %g, 4096
  %at.above = getelementptr float, ptr %data, i32 %above
  %h = load float, ptr %at.above
  br label %tile
tile:
  %sum1 = fadd float %v, %w
  %sum0 = fadd float %sum1, %m
  call void @__offload_cpuir_barrier()
  store float %sum0, ptr %at
  ret void
}";

/// The prefetches of an entry point: their pointers' names.
fn prefetched(entry: &str) -> Vec<&str> {
    entry
        .lines()
        .filter_map(|l| l.split("call void @llvm.prefetch.p0(ptr ").nth(1))
        .map(|rest| rest.split(',').next().unwrap_or(rest))
        .collect()
}

/// Each row of a tile fetches ahead the lines the same row of the worker's next block reads
/// and writes: for its first and last threads, one stream for `data[g]` and `data[g - 1]`
/// (a constant apart), one for `more[g]`, none for the halo row the block's first row reads
/// alone, and the store after the barrier. With two streams a row (without `more`), which the
/// cores' prefetchers follow for a tile's rows, nothing.
#[test]
fn a_tiles_rows_fetch_the_next_blocks_lines_ahead() {
    let (text, _) = form(TILE_BODY);
    let entry = entry_point(&text);
    assert!(entry.contains("%next.block.x = add i32"), "{entry}");
    let pointers = prefetched(entry);
    assert_eq!(pointers.len(), 6, "{entry}");
    for pointer in &pointers {
        let name = pointer.trim_start_matches('%');
        let frozen = format!("%{name} = freeze ptr");
        assert!(entry.contains(&frozen), "{pointer} is not frozen:\n{entry}");
    }
    // Reads, then the writes of the region after the barrier.
    assert_eq!(
        entry.matches(", i32 0, i32 3, i32 1)").count(),
        4,
        "{entry}"
    );
    assert_eq!(
        entry.matches(", i32 1, i32 3, i32 1)").count(),
        2,
        "{entry}"
    );
    let two_streams = TILE_BODY.replace(
        "%sum0 = fadd float %sum1, %m",
        "%sum0 = fadd float %sum1, 1.0",
    );
    let two_streams = two_streams.replace("  %m = load float, ptr %at.more\n", "");
    let (text, _) = form(&two_streams);
    assert!(prefetched(entry_point(&text)).is_empty(), "{text}");
}

/// A block whose rows read and write the same places (a reduction's 256 threads, one row)
/// streams its part of the input; the cores' own prefetchers follow it, and a hint at each
/// block's start only slowed them (a reduction 2.2x slower on AVX-512): no prefetch. Nor
/// where the address is read from memory.
#[test]
fn one_row_blocks_and_addresses_from_memory_fetch_nothing_ahead() {
    let one_row = TILE_BODY.replace("%line = mul i32 %ty, 4096", "%line = add i32 0, 0");
    let (text, _) = form(&one_row);
    assert!(prefetched(entry_point(&text)).is_empty(), "{text}");
    let gathered = TILE_BODY.replace(
        "%line = mul i32 %ty, 4096",
        "%row.at = getelementptr i32, ptr %data, i32 %ty\n  %line = load i32, ptr %row.at",
    );
    let (text, _) = form(&gathered);
    assert!(prefetched(entry_point(&text)).is_empty(), "{text}");
}

/// A block reduction's last step: after a barrier, thread 0 adds the block's value to one
/// total for the whole grid, relaxed, its result unused.
const TOTAL_BODY: &str = "
define void @__offload_cpu_body_k(ptr %params) {
entry:
  %pp = load ptr, ptr %params
  %data = load ptr, ptr %pp
  %op = getelementptr i8, ptr %params, i64 8
  %po = load ptr, ptr %op
  %out = load ptr, ptr %po
  %t = call i32 @__offload_cpuir_index(i32 0)
  %slot = getelementptr i32, ptr %data, i32 %t
  %v = load i32, ptr %slot
  call void @__offload_cpuir_barrier()
  %first = icmp eq i32 %t, 0
  br i1 %first, label %add, label %exit
add:
  %w = zext i32 %v to i64
  %old = atomicrmw add ptr %out, i64 %w monotonic
  br label %exit
exit:
  ret void
}";

/// The lines of `entry` that add atomically, and whether each adds a worker's sum (its
/// address loaded from the sum's slot).
fn atomic_adds(entry: &str) -> Vec<(bool, &str)> {
    entry
        .lines()
        .filter(|l| l.contains("atomicrmw add"))
        .map(|l| (l.contains("atomicrmw add ptr %sum.at"), l))
        .collect()
}

/// Every block's add to the one total becomes an add to the worker's sum, which the worker
/// adds to the total once, at its return: the workers no longer take the total's line from
/// each other once a block.
#[test]
fn a_grids_one_total_is_summed_by_each_worker_and_added_once() {
    let (text, _) = form(TOTAL_BODY);
    let entry = entry_point(&text);
    assert!(entry.contains("%worker.sum = alloca i64"), "{entry}");
    assert!(entry.contains("%sum.added = add i64"), "{entry}");
    let adds = atomic_adds(entry);
    assert!(!adds.is_empty(), "{entry}");
    assert!(adds.iter().all(|(sum, _)| *sum), "{adds:?}");
}

/// Where the adds could be told apart, they stay: the thread reads global memory after its
/// add, the add's result decides what the block does (a ticket), or each block adds to its
/// own address.
#[test]
fn adds_that_a_thread_reads_after_or_uses_or_that_move_with_the_block_stay() {
    let read_after = TOTAL_BODY.replace(
        "exit:\n  ret void",
        "exit:\n  %again = load i32, ptr %data\n  store i32 %again, ptr %slot\n  ret void",
    );
    // A ticket: the block that adds last does more.
    let used = TOTAL_BODY.replace(
        "monotonic\n  br label %exit",
        "monotonic\n  %last = icmp eq i64 %old, 7\n  br i1 %last, label %more, label %exit\nmore:\n  store i32 1, ptr %data\n  br label %exit",
    );
    let per_block = TOTAL_BODY.replace(
        "%old = atomicrmw add ptr %out,",
        "%b = call i32 @__offload_cpuir_index(i32 3)\n  %mine = getelementptr i64, ptr %out, i32 %b\n  %old = atomicrmw add ptr %mine,",
    );
    for body in [read_after, used, per_block] {
        let (text, _) = form(&body);
        let entry = entry_point(&text);
        assert!(!entry.contains("worker.sum"), "{body}\n{entry}");
        let adds = atomic_adds(entry);
        assert!(
            !adds.is_empty() && adds.iter().all(|(sum, _)| !sum),
            "{entry}"
        );
    }
}

/// A grid's maximum (`atomicMax(out, block_max)`) combines as a sum does, each worker's
/// maximum from the smallest `i64`; an add and a maximum on what may be one address do not
/// commute, and keep their locked operations.
#[test]
fn a_grids_one_maximum_is_combined_per_worker_and_mixed_operations_stay() {
    let max = TOTAL_BODY.replace("atomicrmw add ptr %out", "atomicrmw max ptr %out");
    let (text, _) = form(&max);
    let entry = entry_point(&text);
    assert!(
        entry.contains("store i64 -9223372036854775808, ptr %worker.sum"),
        "{entry}"
    );
    assert!(entry.contains("%sum.keeps = icmp sge i64"), "{entry}");
    assert!(entry.contains("atomicrmw max ptr %sum.at"), "{entry}");
    let mixed = TOTAL_BODY.replace(
        "monotonic\n  br label %exit",
        "monotonic\n  %also = atomicrmw max ptr %out, i64 %w monotonic\n  br label %exit",
    );
    let (text, _) = form(&mixed);
    let entry = entry_point(&text);
    assert!(!entry.contains("worker.sum"), "{entry}");
}

use proc_macro2::TokenStream as TokenStream2;
use quote::{ToTokens, format_ident, quote};
use syn::Block;

use super::pieces::read_indices_from_region;
use super::{Plan, plan};

fn plan_of(body: TokenStream2) -> Plan {
    let block: Block = syn::parse2(quote!({ #body })).unwrap();
    plan(&block, &[(format_ident!("n"), false)])
}

fn reason(plan: Plan) -> String {
    match plan {
        Plan::Coroutines(reason) => reason,
        Plan::Regions { .. } => panic!("split into regions"),
        Plan::NoBarriers => panic!("no barriers found"),
    }
}

/// The block code of a plan in region form, as text.
fn regions(plan: Plan) -> String {
    match plan {
        Plan::Regions { block, .. } => block.to_string(),
        Plan::Coroutines(reason) => panic!("not split: {reason}"),
        Plan::NoBarriers => panic!("no barriers found"),
    }
}

#[test]
fn a_match_around_barriers_is_the_blocks() {
    let block = regions(plan_of(quote! {
        let tile = shared_array!(u32, 64);
        let t = thread_idx_x() as usize;
        match n % 3 {
            0 => sync_threads(),
            k if k + block_idx_x() == 1 => {
                unsafe { *tile.add(t) = k };
                sync_threads();
            }
            _ => {}
        }
    }));
    assert!(
        block.contains("match unsafe { :: offload_rt :: __private :: uniform"),
        "{block}"
    );
    assert!(
        block.contains(":: core :: option :: Option :: Some (k) if k + block_idx_x () == 1"),
        "{block}"
    );
    assert!(!block.contains("sync_threads"), "{block}");
    let why = reason(plan_of(quote! {
        let t = thread_idx_x();
        match n {
            k if k > t => sync_threads(),
            _ => {}
        }
    }));
    assert!(why.contains("guard may differ between threads"), "{why}");
    let why = reason(plan_of(quote! {
        match warp_id() {
            0 => { let s = warp_sum(1u32); let _ = s; }
            _ => {}
        }
    }));
    assert!(why.contains("`match` whose value may differ"), "{why}");
}

#[test]
fn a_mutable_local_a_region_only_reads_is_not_written_back() {
    let block = regions(plan_of(quote! {
        let mut acc = thread_idx_x() as u32;
        sync_threads();
        let seen = acc * 2 + n;
        sync_threads();
        acc += seen;
        sync_threads();
        let _ = acc;
    }));
    // Its first value, and after the region that adds to it; not after the one that
    // reads it.
    let writes = block.matches(", __offload_t , acc)").count();
    assert_eq!(writes, 2, "{block}");
}

#[test]
fn barriers_in_loops_and_ifs_split_into_regions() {
    let plan = plan_of(quote! {
        let tile = shared_array!(f32, 256);
        let tx = thread_idx_x() as usize;
        let mut acc = 0.0f32;
        let mut stride = block_dim_x() / 2;
        for step in 0..n / 16 {
            unsafe { *tile.add(tx) = step as f32 };
            sync_threads();
            acc += unsafe { *tile.add(255 - tx) };
            sync_threads();
        }
        while stride > 0 {
            sync_threads();
            stride /= 2;
        }
        if block_idx_x() == 0 {
            sync_threads();
        }
        let _ = acc;
    });
    let (block, counted, lanes) = match plan {
        Plan::Regions {
            block,
            counted,
            lanes,
            ..
        } => (block, counted, lanes.to_string()),
        Plan::Coroutines(reason) => panic!("not split: {reason}"),
        Plan::NoBarriers => panic!("no barriers found"),
    };
    let block = block.to_string();
    // `tx` is recomputed from the region's indices, `acc` kept per thread, `stride`
    // halved once per block.
    assert!(
        block.contains("let tx = __offload_at . thread_idx_x () as usize"),
        "{block}"
    );
    assert!(block.contains("lane_write"), "{block}");
    // Only `acc`'s slot is read: `tx`'s, which every region recomputes, has no storage.
    assert_eq!(
        lanes.matches("lanes (& mut __offload_cursor)").count(),
        1,
        "{lanes}"
    );
    assert_eq!(lanes.matches("null_mut ()").count(), 1, "{lanes}");
    assert!(!block.contains("sync_threads"), "{block}");
    let counted = counted.to_token_stream().to_string();
    assert!(counted.contains("region_barrier"), "{counted}");
    assert!(!counted.contains("sync_threads"), "{counted}");
}

#[test]
fn shapes_the_region_form_cannot_take_say_why() {
    let r = reason(plan_of(quote! { let x = { sync_threads(); 1 }; }));
    assert!(r.contains("`let`"), "{r}");
    let r = reason(plan_of(quote! {
        for i in 0..n { if thread_idx_x() as usize == i { break; } sync_threads(); }
    }));
    assert!(
        r.contains("`break`") && r.contains("may differ between threads"),
        "{r}"
    );
    let r = reason(plan_of(quote! {
        loop { sync_threads(); let v = match n { 0 => break, v => v }; let _ = v; }
    }));
    assert!(r.contains("`break`") && r.contains("`let`"), "{r}");
    let r = reason(plan_of(quote! {
        'rows: for i in 0..n {
            sync_threads();
            for j in 0..n { if j == i { continue 'rows; } }
        }
    }));
    assert!(r.contains("`continue`") && r.contains("nested loop"), "{r}");
    let r = reason(plan_of(quote! {
        let read = |k: usize| unsafe { *tile.add(k) };
        sync_threads();
        let v = read(1);
    }));
    assert!(r.contains("closure") && r.contains("`read`"), "{r}");
    let r = reason(plan_of(
        quote! { let v = if n > 0 { warp_sum(1u32) } else { 0 }; },
    ));
    assert!(r.contains("`warp_sum`") && r.contains("expression"), "{r}");
    let r = reason(plan_of(quote! { let v = record(n) + warp_sum(1u32); }));
    assert!(
        r.contains("`warp_sum`") && r.contains("after a call"),
        "{r}"
    );
    let r = reason(plan_of(quote! { let v = n > 0 && warp_any(true); }));
    assert!(r.contains("`warp_any`") && r.contains("`&&`"), "{r}");
    let r = reason(plan_of(quote! { let v = shuffle_down_masked(3, 1u32, 1); }));
    assert!(r.contains("`shuffle_down_masked`"), "{r}");
    let r = reason(plan_of(quote! {
        let mut v = 1u32;
        for i in 0..thread_idx_x() { v = shuffle_xor(v, i); }
    }));
    assert!(r.contains("loop") && r.contains("may differ"), "{r}");
    let r = reason(plan_of(quote! {
        if warp_id() == 0 { let v = warp_sum(1u32); return; }
    }));
    assert!(
        r.contains("`return`") && r.contains("warp operations"),
        "{r}"
    );
}

#[test]
fn warp_operations_split_into_regions_and_exchanges() {
    let block = regions(plan_of(quote! {
        let v = thread_idx_x();
        let mut offset = warp_size() / 2;
        let mut w = v;
        while offset > 0 {
            w += shuffle_down(w, offset);
            offset /= 2;
        }
        let t = warp_sum(v) / 2 + u32::from(warp_any(v > 3));
        if warp_id() == 0 {
            let m = warp_max(v);
            sync_warp();
        }
        unsafe { *out.add(v as usize) = shuffle_idx(t, 0) }
    }));
    // A shuffle's exchange in the block's loop, the sum's tree, the `any`'s ballot.
    for call in [
        "warp_exchange (",
        "WarpExchange :: Shuffle (:: offload_rt :: __private :: Shuffle :: Down)",
        "WarpExchange :: Shuffle (:: offload_rt :: __private :: Shuffle :: Idx)",
        "warp_sum_tree (",
        "WarpExchange :: Any",
        "warp_butterfly (",
        "for_each_thread_span (",
    ] {
        assert!(block.contains(call), "{call}: {block}");
    }
    // The `if warp_id() == 0` branch's exchange runs for its guard's warps.
    assert!(
        block.contains("warp_butterfly (__offload_guard_"),
        "{block}"
    );
}

#[test]
fn block_uniform_jumps_out_of_barrier_loops_split_into_regions() {
    let plan = plan_of(quote! {
        let tile = shared_array!(f32, 256);
        let t = thread_idx_x() as usize;
        let mut rounds = 0;
        'steps: loop {
            unsafe { *tile.add(t) += 1.0 };
            sync_threads();
            rounds += 1;
            for i in 0..n {
                if i == 2 { continue 'steps; }
                sync_threads();
                if i + rounds > 8 {
                    unsafe { *tile.add(t) *= 2.0 };
                    break 'steps;
                }
            }
            if rounds == n { break }
        }
        while n > 3 {
            sync_threads();
            if block_idx_x() == 1 { continue; }
            break;
        }
    });
    let block = regions(plan);
    for jump in [
        "continue 'steps ;",
        "break 'steps ;",
        "break ;",
        "continue ;",
    ] {
        assert!(block.contains(jump), "{jump}: {block}");
    }
    assert!(block.contains("'steps : loop"), "{block}");
    assert!(!block.contains("sync_threads"), "{block}");
}

#[test]
fn a_mut_parameter_halved_by_the_block_stays_one_value_per_block() {
    let block: Block = syn::parse2(quote!({
        let tile = shared_array!(f32, 256);
        let t = thread_idx_x() as usize;
        while n > 1 {
            sync_threads();
            if t < n {
                unsafe { *tile.add(t) += *tile.add(t + n) };
            }
            n /= 2;
        }
    }))
    .unwrap();
    let block = regions(plan(&block, &[(format_ident!("n"), true)]));
    // Halved between two regions, not per thread in lane storage.
    assert!(block.contains("}) ; n /= 2 ;"), "{block}");
    assert!(
        !block.contains("lane_write (__offload_lane_2 , __offload_t , n)"),
        "{block}"
    );
}

#[test]
fn a_value_read_from_a_block_mutable_is_kept_not_recomputed() {
    let plan = plan_of(quote! {
        let t = thread_idx_x() as usize;
        let mut m = block_dim_x() as usize;
        let j = t + m;
        sync_threads();
        m /= 2;
        sync_threads();
        unsafe { *out.add(j) = m as u32 };
    });
    let block = regions(plan);
    // `j` is `t + m` with the first `m`: read back from lane storage after `m /= 2`.
    let last = block.rsplit("for_each_thread").next().unwrap();
    assert!(!last.contains("let j = t + m"), "{block}");
    assert!(
        last.contains("let j = :: offload_rt :: __private :: lane_read"),
        "{block}"
    );
}

#[test]
fn atomics_on_the_blocks_shared_memory_become_plain_accesses() {
    let block = regions(plan_of(quote! {
        let local: *mut u32 = shared_array!(u32, 256);
        let t = thread_idx_x() as usize;
        unsafe { *local.add(t) = 0 };
        sync_threads();
        unsafe {
            AtomicU32::from_ptr(local.add(t % 7)).fetch_add(1, Ordering::Relaxed);
            core::sync::atomic::AtomicU32::from_ptr(local).fetch_max(3, Ordering::Relaxed);
            AtomicU32::from_ptr(out.add(t)).fetch_add(1, Ordering::Relaxed);
        }
        unsafe { AtomicU32::from_ptr(local.add(1)) }.store(5, Ordering::Relaxed);
        let elsewhere = local.wrapping_add(0).read();
        let _ = unsafe { AtomicU32::from_ptr(elsewhere.add(1)) }.load(Ordering::Relaxed);
    }));
    let plain = ":: offload_rt :: __private :: block_atomic ::";
    for op in ["fetch_add", "fetch_max", "store"] {
        assert!(
            block.contains(&format!("{plain} {op} :: < u32 >")),
            "{op}: {block}"
        );
    }
    // `out` is global memory; `elsewhere` a value read from shared memory.
    assert!(
        block.contains("AtomicU32 :: from_ptr (out . add (t)) . fetch_add"),
        "{block}"
    );
    assert!(block.contains("from_ptr (elsewhere . add (1))"), "{block}");
    assert!(!block.contains(&format!("{plain} load")), "{block}");
}

#[test]
fn stride_loops_run_iteration_by_iteration_for_the_block() {
    let block = regions(plan_of(quote! {
        let local: *mut u32 = shared_array!(u32, 256);
        for b in block_stride_x(256) {
            unsafe { *local.add(b) = 0 };
        }
        sync_threads();
        for i in grid_stride_x(n) {
            unsafe { *local.add(i % 256) += 1 };
        }
        for i in grid_stride_x(n) {
            if i == 3 { continue; }
        }
    }));
    for (trips, at) in [
        ("block_stride_trips (256)", "block_stride_at (__offload_k)"),
        ("grid_stride_trips (n)", "grid_stride_at (__offload_k)"),
    ] {
        assert!(
            block.contains(trips) && block.contains(at),
            "{trips}: {block}"
        );
    }
    // A `continue` in the body keeps the loop per thread.
    assert!(block.contains("for i in grid_stride_x (n)"), "{block}");
}

#[test]
fn a_region_that_only_tests_the_thread_against_a_block_limit_runs_those_threads() {
    let block = regions(plan_of(quote! {
        let partial: *mut u64 = shared_array!(u64, 256);
        let tid = thread_idx_x() as usize;
        unsafe { *partial.add(tid) = 1 };
        sync_threads();
        let mut stride = block_dim_x() as usize / 2;
        while stride > 0 {
            if tid < stride {
                unsafe { *partial.add(tid) += *partial.add(tid + stride) };
            }
            sync_threads();
            stride /= 2;
        }
        if tid == 0 {
            unsafe { *partial.add(0) += 1 };
        }
        sync_threads();
        if thread_idx_x() < 3 {
            unsafe { *partial.add(1) = 0 };
        } else {
            unsafe { *partial.add(2) = 0 };
        }
    }));
    let all = "(0usize , usize :: MAX)";
    let below = format!(
        "for_each_thread_in (:: offload_rt :: __private :: thread_range_lt :: < usize > (0 , stride) , {all} ,"
    );
    assert!(block.contains(&below), "{block}");
    let first = format!(
        "for_each_thread_in (:: offload_rt :: __private :: thread_range_eq :: < usize > (0 , 0) , {all} ,"
    );
    assert!(block.contains(&first), "{block}");
    // With an `else`, every thread runs the region.
    assert_eq!(block.matches("for_each_thread_in").count(), 2, "{block}");
}

#[test]
fn a_stencils_guarded_loads_run_as_loops_over_the_threads_they_guard() {
    let block = regions(plan_of(quote! {
        let tile: *mut f32 = shared_array!(f32, 18 * 18);
        let n = n as usize;
        let tx = thread_idx_x() as usize;
        let ty = thread_idx_y() as usize;
        let row = block_idx_y() as usize * T + ty;
        let col = block_idx_x() as usize * T + tx;
        let inside = row < n && col < n;
        let s = (ty + 1) * PITCH + tx + 1;
        if inside {
            let g = row * n + col;
            unsafe {
                *tile.add(s) = *input.add(g);
                if tx == 0 && col > 0 {
                    *tile.add(s - 1) = *input.add(g - 1);
                }
                if ty == T - 1 && row + 1 < n {
                    *tile.add(s + PITCH) = *input.add(g + n);
                }
            }
        }
        sync_threads();
        if inside {
            unsafe { *output.add(row * n + col) = *tile.add(s) };
        }
    }));
    let lt = |base: &str, bound: &str| format!("thread_range_lt :: < usize > ({base} , {bound})");
    let row = lt("block_idx_y () as usize * T", "n");
    let col = lt("block_idx_x () as usize * T", "n");
    // The first region: the main load for the threads inside the grid, then a loop per
    // halo load, over the threads of its edge only.
    let eq = |base: &str, value: &str| format!("thread_range_eq :: < usize > ({base} , {value})");
    let pieces: Vec<&str> = block.split("for_each_thread_in (").skip(1).collect();
    assert_eq!(pieces.len(), 4, "{block}");
    assert!(
        pieces[0].contains(&col) && pieces[0].contains(&row),
        "{block}"
    );
    assert!(
        pieces[0].contains("* tile . add (s) = * input . add (g)"),
        "{block}"
    );
    assert!(!pieces[0].contains("tx == 0"), "{block}");
    assert!(pieces[1].contains(&eq("0", "0")), "{block}");
    assert!(pieces[1].contains("if tx == 0 && col > 0"), "{block}");
    assert!(!pieces[1].contains("* tile . add (s) = "), "{block}");
    assert!(pieces[2].contains(&eq("0", "T - 1")), "{block}");
    // Every piece recomputes what it needs, and tests `inside` again.
    for piece in &pieces[..3] {
        assert!(piece.contains("let g = row * n + col"), "{block}");
        assert!(piece.contains("if inside"), "{block}");
    }
    // The second region: narrowed, not split.
    assert!(
        pieces[3].contains(&col) && pieces[3].contains(&row),
        "{block}"
    );
    // Nothing reads lane storage: every local is recomputed.
    assert!(!block.contains("lane_read"), "{block}");
}

#[test]
fn a_let_that_may_panic_keeps_its_region_over_every_thread() {
    let block = regions(plan_of(quote! {
        let tile: *mut u32 = shared_array!(u32, 256);
        let tx = thread_idx_x() as usize;
        sync_threads();
        let q = 1000 / tx;
        if tx == 3 {
            unsafe { *tile.add(q) = 1 };
        }
        sync_threads();
        let r = 1000 % (tx + 1);
    }));
    // Thread 0 divides by zero before the test, so every thread runs the region; the
    // last region, only a `let`, still runs.
    assert!(!block.contains("thread_range_eq"), "{block}");
    assert!(block.contains("let r = 1000 % (tx + 1)"), "{block}");
}

#[test]
fn a_region_whose_edge_test_no_thread_of_the_block_passes_runs_without_it() {
    let block = regions(plan_of(quote! {
        let tile: *mut f32 = shared_array!(f32, 256);
        let n = n as usize;
        let z = block_idx_z() as usize;
        let col = block_idx_x() as usize * 16 + thread_idx_x() as usize;
        let row = block_idx_y() as usize * 16 + thread_idx_y() as usize;
        sync_threads();
        if row < n && col < n {
            let face = col == 0 || z == 0 || row + 1 == n;
            let mixed = col == 0 || col < 3;
            unsafe { *out.add(row * n + col) = if face || mixed { 1.0 } else { *tile } };
        }
    }));
    // `face` is false where no thread has `col == 0` or `row + 1 == n` and `z != 0`; the
    // `<` test in `mixed` is no edge, so `mixed` stays.
    let miss = "thread_ranges_miss (& [:: offload_rt :: __private :: thread_range_eq :: < \
                usize > (block_idx_x () as usize * 16 , 0)] , & [:: offload_rt :: \
                __private :: thread_range_eq :: < usize > ((block_idx_y () as usize * 16) \
                + (1) , n)])";
    assert!(
        block.contains(&format!(
            "! (z == 0) && :: offload_rt :: __private :: {miss}"
        )),
        "{block}"
    );
    assert!(block.contains("let face : bool = false ;"), "{block}");
    assert!(!block.contains("let mixed : bool = false"), "{block}");
    assert!(block.contains("target_feature = \"avx2\""), "{block}");
}

#[test]
fn a_constant_loop_that_keeps_no_state_runs_iteration_by_iteration_for_the_block() {
    let block = regions(plan_of(quote! {
        let tile: *mut f32 = shared_array!(f32, 256);
        let tx = thread_idx_x() as usize;
        let mut acc = 0.0f32;
        for i in 0..4 {
            let j = i * 64;
            if tx + j < n {
                unsafe { *tile.add(tx + j) = 1.0 };
            }
        }
        sync_threads();
        for k in 0..16 {
            acc += unsafe { *tile.add(k) };
        }
        for k in 0..16 {
            if k == 3 {
                break;
            }
            unsafe { *tile.add(k) = 2.0 };
        }
        for k in 0..n {
            unsafe { *tile.add(tx) += 1.0 };
        }
        let _ = acc;
    }));
    // The first loop is the block's: its body a region narrowed by its test.
    assert!(block.contains("for i in"), "{block}");
    let first = block.split("for i in").nth(1).unwrap();
    assert!(
        first.contains(
            "for_each_thread_in (:: offload_rt :: __private :: thread_range_lt :: < usize > (j , n)"
        ),
        "{block}"
    );
    // A loop that accumulates into a thread's local, or jumps, stays in its region.
    assert!(block.contains("for k in 0 .. 16 { acc +="), "{block}");
    assert!(
        block.contains("for k in 0 .. 16 { if k == 3 { break ; }"),
        "{block}"
    );
    // A range known only at run time keeps each thread's iterations together.
    assert!(block.contains("for k in 0 .. n { unsafe"), "{block}");
}

#[test]
fn a_region_reads_its_unqualified_index_calls_from_its_indices() {
    let read = read_indices_from_region(quote! {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        let j = kernel::thread_idx_y() + grid.thread_idx_y() + thread_rank;
        f(global_idx_x(), [block_size()], thread_idx_z(1));
    })
    .to_string();
    assert!(
        read.contains(
            "let i = __offload_at . block_idx_x () * __offload_at . block_dim_x () + \
             __offload_at . thread_idx_x ()"
        ),
        "{read}"
    );
    // Paths, methods of other values, names that are not calls, calls with arguments:
    // left as written.
    assert!(
        read.contains("let j = kernel :: thread_idx_y () + grid . thread_idx_y () + thread_rank"),
        "{read}"
    );
    assert!(
        read.contains(
            "f (__offload_at . global_idx_x () , [__offload_at . block_size ()] , \
             thread_idx_z (1))"
        ),
        "{read}"
    );
}

#[test]
fn kernels_without_barriers_are_left_alone() {
    assert!(matches!(
        plan_of(quote! { let i = global_idx_x(); let _ = i; }),
        Plan::NoBarriers
    ));
}

//! Block barriers that are alternatives of one another made one. LLVM's jump threading
//! copies a barrier into each way of a branch on a thread's own condition
//! (`if warp == 0 { .. } sync_threads(); if warp > 0 { .. }` becomes one barrier a way, a
//! reduction's unrolled `if tid < stride { .. } sync_threads()` one chain of barriers for the
//! threads still adding and one for the others). On a GPU a block barrier waits for the
//! block's threads wherever each reached one (`bar.sync 0`), as the thread loops run threads
//! waiting at different barriers in turn; made one call again, the block's threads run the
//! region after it together, and the block-uniform analysis sees the branch join.
//!
//! Two barriers are alternatives where the threads leaving one barrier (or the start) can
//! reach either first and neither reaches the other (as a loop around them, or barriers one
//! after the other, would): a group of such barriers, none reaching another, is made one
//! call, which makes no loop. After it each thread goes on from where it reached its barrier:
//! the way it came is stored before the barrier (in one local for all groups: each group's is
//! read right after its barrier) and switched on after it.
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use super::super::ir::{Block, Function, Instruction, Module, Value};
use super::hooks::{Complete, callee};

/// Makes each group of alternative block barriers of `body` one barrier; returns how many
/// barrier calls were merged away.
pub(super) fn merge_alternative_barriers<'m>(
    module: Module<'m>,
    body: Function<'m>,
    hooks: &Complete<'m>,
) -> usize {
    let Some(barrier) = hooks.barrier else {
        return 0;
    };
    let is_block_barrier =
        |i: Instruction<'m>| i.as_value().as_call().and_then(callee) == Some(barrier);
    // Where a thread stops: a block barrier, or an interleaved loop's trip (cut at the same).
    let stops = |i: Instruction<'m>| hooks.is_barrier(i) && !hooks.is_warp_barrier(i);
    let calls: Vec<Instruction<'m>> = body
        .blocks()
        .flat_map(|b| b.instructions())
        .filter(|i| is_block_barrier(*i))
        .collect();
    if calls.len() < 2 {
        return 0;
    }
    let index: HashMap<Instruction<'m>, usize> =
        calls.iter().enumerate().map(|(n, c)| (*c, n)).collect();
    // Which barriers a thread leaving each one can reach at all.
    let reach: Vec<HashSet<usize>> = calls
        .iter()
        .map(|call| {
            let mut reached = HashSet::new();
            walk(Start::After(*call), &mut |i| {
                if let Some(&n) = index.get(&i) {
                    reached.insert(n);
                }
                false
            });
            reached
        })
        .collect();
    let apart = |a: usize, b: usize| !reach[a].contains(&b) && !reach[b].contains(&a);
    let mut groups = UnionFind::new(calls.len());
    let entry = body.entry_block().expect("checked: the body has blocks");
    let starts = std::iter::once(Start::Block(entry)).chain(calls.iter().map(|c| Start::After(*c)));
    for start in starts {
        let mut first = Vec::new();
        walk(start, &mut |i| {
            if !stops(i) {
                return false;
            }
            if let Some(&n) = index.get(&i) {
                first.push(n);
            }
            true
        });
        for (k, &a) in first.iter().enumerate() {
            for &b in &first[k + 1..] {
                if apart(a, b) {
                    groups.union(a, b);
                }
            }
        }
    }
    let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
    for n in 0..calls.len() {
        by_root.entry(groups.find(n)).or_default().push(n);
    }
    let mut merged = 0;
    let mut way = None;
    let mut roots: Vec<usize> = by_root.keys().copied().collect();
    roots.sort_unstable();
    for root in roots {
        let members: Vec<Instruction<'m>> = by_root[&root].iter().map(|&n| calls[n]).collect();
        let apart_all = by_root[&root]
            .iter()
            .enumerate()
            .all(|(k, &a)| by_root[&root][k + 1..].iter().all(|&b| apart(a, b)));
        if members.len() < 2 || !apart_all {
            continue;
        }
        let way = *way.get_or_insert_with(|| {
            let builder = module.builder();
            builder.position_at_start(entry);
            builder
                .build_alloca(module.i32_type(), 4, c"barrier.way")
                .as_value()
        });
        merge(module, body, barrier, way, &members);
        merged += members.len() - 1;
    }
    merged
}

/// Where a walk over the body starts: a block's first instruction, or after an instruction.
#[derive(Clone, Copy)]
enum Start<'m> {
    Block(Block<'m>),
    After(Instruction<'m>),
}

/// Visits the instructions reachable from `start`, each once; `stop(i)` true ends the path at
/// `i`.
fn walk<'m>(start: Start<'m>, stop: &mut dyn FnMut(Instruction<'m>) -> bool) {
    let mut entered: HashSet<Block<'m>> = HashSet::new();
    let mut pending: Vec<Block<'m>> = Vec::new();
    let (block, from) = match start {
        Start::Block(b) => {
            entered.insert(b);
            (b, b.first_instruction())
        }
        Start::After(i) => (i.block(), i.next()),
    };
    let mut run = |block: Block<'m>, from: Option<Instruction<'m>>, pending: &mut Vec<_>| {
        let mut at = from;
        while let Some(i) = at {
            if stop(i) {
                return;
            }
            at = i.next();
        }
        let successors = block.terminator().into_iter().flat_map(|t| t.successors());
        pending.extend(successors);
    };
    run(block, from, &mut pending);
    while let Some(b) = pending.pop() {
        if entered.insert(b) {
            run(b, b.first_instruction(), &mut pending);
        }
    }
}

/// Makes `members` one call of `barrier` in a block of its own: each member's block ends
/// before it, storing which member it was in `way` (an `i32` local) and going to the new
/// block, which calls the barrier and goes on to that member's rest, moved into a block of
/// its own.
fn merge<'m>(
    module: Module<'m>,
    body: Function<'m>,
    barrier: Function<'m>,
    way: Value<'m>,
    members: &[Instruction<'m>],
) {
    let builder = module.builder();
    let i32_ty = module.i32_type();
    let location = members[0].debug_location();
    let joined = body.append_block(c"barrier.joined");
    let mut ways = Vec::new();
    for (n, member) in members.iter().enumerate() {
        let block = member.block();
        let rest = body.append_block(c"barrier.rest");
        builder.position_at_end(rest);
        let mut at = member.next();
        while let Some(i) = at {
            at = i.next();
            let copy = builder.insert_clone(i);
            i.as_value().replace_all_uses_with(copy.as_value());
            i.erase();
        }
        redirect_phis(module, rest, block);
        member.erase();
        builder.position_at_end(block);
        builder.build_store(i32_ty.const_int(n as u64, false), way);
        builder.build_br(joined);
        ways.push((i32_ty.const_int(n as u64, false), rest));
    }
    builder.position_at_end(joined);
    let call = builder.build_call(barrier, &[], c"");
    call.instruction().set_debug_location(location);
    let taken = builder.build_load(i32_ty, way, c"barrier.way").as_value();
    builder.build_switch(taken, ways[0].1, &ways[1..]);
}

/// The phis of `block`'s successors name `from` as the way in: they name `block`, which now
/// ends in `from`'s terminator.
fn redirect_phis<'m>(module: Module<'m>, block: Block<'m>, from: Block<'m>) {
    let builder = module.builder();
    let successors: HashSet<Block<'m>> = block
        .terminator()
        .into_iter()
        .flat_map(|t| t.successors())
        .collect();
    for successor in successors {
        let phis: Vec<Instruction<'m>> = successor
            .instructions()
            .take_while(|i| i.as_value().is_phi())
            .collect();
        for old in phis {
            let as_phi = old.as_value().as_phi().expect("a phi");
            let incoming: Vec<_> = as_phi.incomings().collect();
            if !incoming.iter().any(|(_, b)| *b == from) {
                continue;
            }
            builder.position_before(old);
            let new = builder.build_phi(old.as_value().ty(), c"");
            for (value, b) in incoming {
                new.add_incoming(value, if b == from { block } else { b });
            }
            old.as_value().replace_all_uses_with(new.as_value());
            old.erase();
        }
    }
}

/// Disjoint sets of `0..n`.
struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind((0..n).collect())
    }

    fn find(&mut self, n: usize) -> usize {
        let mut root = n;
        while self.0[root] != root {
            root = self.0[root];
        }
        let mut at = n;
        while self.0[at] != root {
            let next = self.0[at];
            self.0[at] = root;
            at = next;
        }
        root
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }
}

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
//! after the other, would) but through the barrier they left (the trip's last barrier of a
//! loop around both, `hotspot`'s `if inside { step } sync_threads()` in its stepping loop): a
//! group of such barriers is made one call, which makes no loop the body did not have. After
//! it each thread goes on from where it reached its barrier: the way it came is stored before
//! the barrier (in one local for all groups: each group's is read right after its barrier)
//! and switched on after it. Where two barriers are the ways of a branch on a condition
//! computed from the thread's indices and the block's values (a stencil's
//! `if inside { .. } sync_threads(); if inside { .. }`), the way is that condition again after
//! the barrier: a stored way is each thread's, kept across the barrier, and the
//! loops after it test every thread's (masked loads in every vector, `stencil7` 1.7x) where
//! the condition lets range-check elimination take the bound off the loop.
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use super::super::ir::{Block, Function, Instruction, Module, Value};
use super::dominators::Dominators;
use super::hooks::{Complete, callee};
use super::segments::Segments;

/// Makes each group of alternative block barriers of `body` one barrier; returns how many
/// barrier calls were merged away. `recomputed` says which conditions the regions compute
/// again after a barrier.
pub(super) fn merge_alternative_barriers<'m>(
    module: Module<'m>,
    body: Function<'m>,
    hooks: &Complete<'m>,
    recomputed: &mut dyn FnMut(Value<'m>) -> bool,
) -> usize {
    let Some(barrier) = hooks.barrier else {
        return 0;
    };
    // Cut where a thread waits for the block: at block barriers and interleaved trips' tops.
    let segments = Segments::of(body, &|i| hooks.is_block_barrier(i));
    let calls: Vec<Instruction<'m>> = segments
        .list
        .iter()
        .filter_map(|s| s.barrier)
        .filter(|i| i.as_value().as_call().and_then(callee) == Some(barrier))
        .collect();
    if calls.len() < 2 {
        return 0;
    }
    let index: HashMap<Instruction<'m>, usize> =
        calls.iter().enumerate().map(|(n, c)| (*c, n)).collect();
    let reach = segments.reachability();
    let leads_to = |a: usize, b: usize| {
        reach[segments.after_barrier[&calls[a]]][segments.of_instruction[&calls[b]]]
    };
    let apart = |a: usize, b: usize| !leads_to(a, b) && !leads_to(b, a);
    // The body's start (its first segment) and each barrier's continuation: the barriers a
    // thread leaving there reaches first are alternatives where apart. Leaving a barrier in
    // a loop, they lead to one another around the loop, through that barrier: apart within
    // a trip is enough, as merging them makes no loop the body did not have.
    let starts = std::iter::once((0, None)).chain(
        calls
            .iter()
            .map(|c| (segments.after_barrier[c], Some(segments.of_instruction[c]))),
    );
    let mut groups = UnionFind::new(calls.len());
    let mut alternatives = HashSet::new();
    for (start, through) in starts {
        let first: Vec<usize> = segments
            .region(start)
            .into_iter()
            .filter_map(|s| index.get(&segments.list[s].barrier?).copied())
            .collect();
        let leads_to_within = |a: usize, b: usize| {
            segments.leads_to_avoiding(
                segments.after_barrier[&calls[a]],
                segments.of_instruction[&calls[b]],
                through,
            )
        };
        for (k, &a) in first.iter().enumerate() {
            for &b in &first[k + 1..] {
                if !leads_to_within(a, b) && !leads_to_within(b, a) {
                    groups.union(a, b);
                    alternatives.insert((a.min(b), a.max(b)));
                }
            }
        }
    }
    let alternative =
        |a: usize, b: usize| apart(a, b) || alternatives.contains(&(a.min(b), a.max(b)));
    let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
    for n in 0..calls.len() {
        by_root.entry(groups.find(n)).or_default().push(n);
    }
    let mut roots: Vec<usize> = by_root.keys().copied().collect();
    roots.sort_unstable();
    let entry = body.entry_block().expect("checked: the body has blocks");
    let groups: Vec<Vec<Instruction<'m>>> = roots
        .iter()
        .map(|root| &by_root[root])
        .filter(|group| {
            group.len() >= 2
                && group
                    .iter()
                    .enumerate()
                    .all(|(k, &a)| group[k + 1..].iter().all(|&b| alternative(a, b)))
        })
        .map(|group| group.iter().map(|&n| calls[n]).collect())
        .collect();
    // Decided before any merge changes the blocks. A merge moves what follows each member
    // barrier in its block into a block of its own (copied, the original erased): a condition
    // in the block of an earlier group's member may be gone by its group's turn, and its
    // group stores its way instead.
    // Each decision keeps its condition's block, found now (by then the handle may be erased).
    let dominators = Dominators::of(body);
    let decided: Vec<Option<(Value<'m>, bool, Option<Block<'m>>)>> = groups
        .iter()
        .map(|members| match members[..] {
            [a, b] => dominators
                .deciding_branch([a.block(), b.block()])
                .filter(|(condition, _)| recomputed(*condition))
                .map(|(condition, true_to_first)| {
                    let home = condition.as_instruction().map(|i| i.block());
                    (condition, true_to_first, home)
                }),
            _ => None,
        })
        .collect();
    let mut moved: HashSet<Block<'m>> = HashSet::new();
    let mut way = None;
    let mut merged = 0;
    for (members, decided) in groups.iter().zip(decided) {
        let still_there = |(_, _, home): &(Value<'m>, bool, Option<Block<'m>>)| {
            home.is_none_or(|b| !moved.contains(&b))
        };
        let taken = match decided.filter(still_there) {
            Some((condition, true_to_first, _)) => Way::Decided {
                condition,
                true_to_first,
            },
            None => Way::Stored(*way.get_or_insert_with(|| {
                let builder = module.builder();
                builder.position_at_start(entry);
                builder
                    .build_alloca(module.i32_type(), 4, c"barrier.way")
                    .as_value()
            })),
        };
        moved.extend(members.iter().map(|m| m.block()));
        merge(module, body, barrier, taken, members);
        merged += members.len() - 1;
    }
    merged
}

/// How a merged barrier's threads find the way they came.
#[derive(Clone, Copy)]
enum Way<'m> {
    /// Stored before the barrier in this `i32` local.
    Stored(Value<'m>),
    /// The first member's way where `condition` is `true_to_first`, else the second's.
    Decided {
        condition: Value<'m>,
        true_to_first: bool,
    },
}

/// Makes `members` one call of `barrier` in a block of its own: each member's block ends
/// before it, storing which member it was where the `way` is stored, and going to the new
/// block, which calls the barrier and goes on to that member's rest, moved into a block of
/// its own.
fn merge<'m>(
    module: Module<'m>,
    body: Function<'m>,
    barrier: Function<'m>,
    way: Way<'m>,
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
        let n = i32_ty.const_int(n as u64, false);
        builder.position_at_end(block);
        if let Way::Stored(slot) = way {
            builder.build_store(n, slot);
        }
        builder.build_br(joined);
        ways.push((n, rest));
    }
    builder.position_at_end(joined);
    let call = builder.build_call(barrier, &[], c"");
    call.instruction().set_debug_location(location);
    let taken = match way {
        Way::Stored(slot) => builder.build_load(i32_ty, slot, c"barrier.way").as_value(),
        Way::Decided {
            condition,
            true_to_first,
        } => {
            let (first, second) = (ways[0].0, ways[1].0);
            let (on_true, on_false) = if true_to_first {
                (first, second)
            } else {
                (second, first)
            };
            builder.build_select(condition, on_true, on_false, c"barrier.way")
        }
    };
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

//! The warp operations' turns in the formed bodies. Each warp operation publishes a thread's
//! value in one of two halves of an exchange, in turn, so that a lane writing its next
//! operation's value never overwrites one its warp may still read; the kernel side keeps the
//! turn per thread in the OS thread's storage ([`offload_format::abi::CPU_IR_WARP_TURN`]),
//! which a region's loop reads and writes at each thread's own offset, so the exchange's
//! addresses are each thread's own. In a formed body the turn becomes a local of the thread
//! instead, 0 at the start and again after each block barrier (every lane has read its warp's
//! slots by then): where every thread takes the same turns (warp operations under the block's
//! own control flow) the turn is then the block's, the exchange's slots consecutive in a
//! region's loop.

use inkwell::values::InstructionOpcode;

use super::super::ir::{Function, Module};
use super::hooks::{Hooks, callee, calls};
use super::inline::run_passes;
use crate::device_link::error::Result;

/// Replaces the turn hook's calls in `bodies` with a local of each thread, and promotes it to
/// values.
pub(super) fn keep_warp_turns_in_locals<'m>(
    module: Module<'m>,
    hooks: &Hooks<'m>,
    bodies: impl IntoIterator<Item = Function<'m>>,
) -> Result<()> {
    let Some(hook) = hooks.warp_turn else {
        return Ok(());
    };
    let i32_type = module.i32_type();
    let (zero, one) = (i32_type.const_int(0, false), i32_type.const_int(1, false));
    let builder = module.builder();
    let mut rewritten = false;
    for body in bodies {
        let turns: Vec<_> = calls(body).filter(|c| callee(*c) == Some(hook)).collect();
        let Some(entry) = body.entry_block().filter(|_| !turns.is_empty()) else {
            continue;
        };
        rewritten = true;
        builder.position_at_start(entry);
        let turn = builder.build_alloca(i32_type, 4, c"warp.turn").as_value();
        builder.build_store(zero, turn);
        for call in turns {
            builder.position_before(call.instruction());
            let this = builder.build_load(i32_type, turn, c"turn").as_value();
            let next = builder.build_binop(InstructionOpcode::Xor, this, one, c"turn.next");
            builder.build_store(next, turn);
            call.as_value().replace_all_uses_with(this);
            call.instruction().erase();
        }
        let block_barriers: Vec<_> = calls(body)
            .filter(|c| hooks.barrier.is_some() && callee(*c) == hooks.barrier)
            .collect();
        for barrier in block_barriers {
            let after = barrier
                .instruction()
                .next()
                .expect("a call is followed by its block's terminator at least");
            builder.position_before(after);
            builder.build_store(zero, turn);
        }
    }
    if rewritten {
        run_passes(module, "function(sroa)")?;
    }
    Ok(())
}

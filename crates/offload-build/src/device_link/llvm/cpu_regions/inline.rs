//! Everything that reaches a barrier inlined into the kernel bodies, and the kernels that
//! reach one through recursion.

use std::collections::{HashMap, HashSet};

use offload_format::abi;

use super::super::ir::{AttributeIndex, Function, Module};
use super::hooks::{Hooks, callee, calls, demangled, name_of, with_location};
use crate::device_link::error::{LinkError, Result};

/// Marks every function that reaches a barrier `alwaysinline` and inlines it; returns the
/// ones that reach a barrier through recursion, which cannot be inlined, with the reason.
pub(super) fn inline_what_reaches_barriers<'m>(
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
        if recursive.contains_key(f) {
            continue;
        }
        inline_calls_of(*f);
        if bodies.contains(f) {
            continue;
        }
        f.remove_enum_attribute(AttributeIndex::Function, "noinline");
        f.remove_enum_attribute(AttributeIndex::Function, "optnone");
        f.add_enum_attribute(AttributeIndex::Function, "alwaysinline");
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
    run_passes(module, "always-inline,function(sroa,early-cse,simplifycfg)")?;
    Ok(reasons
        .into_iter()
        .filter_map(|(name, reason)| Some((module.function(&name)?, reason)))
        .collect())
}

/// Takes `noinline` off the calls of `f`: rustc repeats an `#[inline(never)]` of another
/// crate's function on its calls.
pub(super) fn inline_calls_of(f: Function<'_>) {
    for user in f.as_value().users() {
        if let Some(call) = user.as_call().filter(|c| callee(*c) == Some(f)) {
            call.remove_enum_attribute(AttributeIndex::Function, "noinline");
        }
    }
}

/// LLVM's passes `pipeline` over `module`, a failure named with the pipeline.
pub(super) fn run_passes(module: Module<'_>, pipeline: &str) -> Result<()> {
    module
        .run_passes(pipeline)
        .map_err(|message| LinkError::Passes {
            pipeline: pipeline.to_owned(),
            message,
        })
}

/// Why `body` keeps coroutines when it calls a function that reaches a barrier recursively.
pub(super) fn recursive_callee<'m>(
    body: Function<'m>,
    recursive: &HashMap<Function<'m>, String>,
) -> Option<String> {
    calls(body).find_map(|c| {
        let reason = recursive.get(&callee(c)?)?;
        Some(with_location(reason, c.instruction()))
    })
}

use offload_rt::kernels;

#[kernels]
pub fn not_a_module() {}

#[kernels(fast)]
mod with_arguments {}

fn main() {}

use offload_rt::kernel;

#[kernel]
pub fn takes_a_reference(x: &u32) {
    let _ = x;
}

#[kernel]
pub fn returns_a_value(n: u32) -> u32 {
    n
}

#[kernel]
pub fn char_param(letter: char) {
    let _ = letter;
}

#[kernel]
pub fn tuple_of_a_char(pair: (u32, char)) {
    let _ = pair;
}

#[kernel]
pub fn unit_param(nothing: ()) {
    let _ = nothing;
}

#[kernel]
pub fn grid_not_first(n: u32, grid: offload_rt::kernel::Grid) {
    let _ = (n, grid);
}

mod mine {
    #[derive(Clone, Copy)]
    pub struct Grid;
}

#[kernel]
pub fn not_the_runtimes_grid(grid: mine::Grid) {
    let _ = grid;
}

fn main() {}

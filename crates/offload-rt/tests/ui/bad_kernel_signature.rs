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

fn main() {}

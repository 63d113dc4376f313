//! Generated order problems of any size, for the order search's tests and benchmark: irregular
//! graphs like streaming models, where some operators read nothing from earlier operators (state
//! reads, constants) and feed one far later, and others join recent and far branches.

use super::problem::{Buffer, OrderProblem};

/// xorshift64*: a few lines that make the same graph from the same seed on every machine.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

/// A problem of `operators` operators (at least 1), the same for the same seed. Operator `k`
/// writes buffer `k + 1`; buffer 0 is the graph input, the last operator's output the graph
/// output; sizes are multiples of 16 up to 4 KiB; a fifth of the operators read no earlier
/// output, the others one to three, mostly recent.
pub fn generated_problem(operators: usize, seed: u64) -> OrderProblem {
    let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut buffers = vec![Buffer {
        size: 16 * (1 + random.below(64)),
        touchers: Vec::new(),
        from_start: true,
        to_end: false,
    }];
    let mut before = vec![Vec::new(); operators];
    let mut touches = vec![Vec::new(); operators];
    let mut transient = vec![0; operators];
    for operator in 0..operators {
        let mut reads: Vec<usize> = Vec::new();
        if operator == 0 {
            reads.push(0);
        } else if random.below(5) != 0 {
            for _ in 0..1 + random.below(3) {
                // Mostly one of the last few outputs, sometimes any earlier one.
                let back = if random.below(4) == 0 {
                    random.below(operator as u64 + 1)
                } else {
                    random.below(4.min(operator as u64 + 1))
                };
                reads.push(operator - back as usize);
            }
        }
        reads.sort_unstable();
        reads.dedup();
        for &buffer in &reads {
            buffers[buffer].touchers.push(operator as u32);
            touches[operator].push(buffer as u32);
            if buffer > 0 {
                before[operator].push(buffer as u32 - 1);
            }
        }
        touches[operator].push(buffers.len() as u32);
        buffers.push(Buffer {
            size: 16 * (1 + random.below(256)),
            touchers: vec![operator as u32],
            from_start: false,
            to_end: operator + 1 == operators,
        });
        if random.below(8) == 0 {
            transient[operator] = 16 * random.below(32);
        }
    }
    for buffer in &mut buffers {
        buffer.touchers.sort_unstable();
        buffer.touchers.dedup();
    }
    OrderProblem {
        before,
        touches,
        transient,
        buffers,
    }
}

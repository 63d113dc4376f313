//! A planner's time limit: what it may take past it, and when its work must stop for its plan
//! to come back within that. `memplan bench` flags a planner call that ends later than the
//! limit plus its allowance (10 % of the limit and 50 ms); these let a planner keep to it.

use std::time::{Duration, Instant};

/// Time to reckon per buffer from a packer's stop to the planner's return (other threads'
/// stop, the plan's bindings, the memory given back): 17-38 ms at 1,000,000 random buffers in
/// the portfolio.
pub const RETURN_TIME_PER_BUFFER: Duration = Duration::from_nanos(40);

/// `per_buffer` for each of `count` buffers: what a packing or a return reckoned per buffer
/// takes, saturating where the product outgrows a `Duration` (and at `u32::MAX` buffers,
/// beyond any arena, rather than wrapping to a short time).
pub fn for_buffers(per_buffer: Duration, count: usize) -> Duration {
    per_buffer.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX))
}

/// The latest a planner given `buffers` buffers whose time limit counts from `made` and ends
/// at `sooner` can stop its work and still return within the limit's allowance (10 % of it
/// and 50 ms): the allowance less the time to return, a quarter of it or
/// [`RETURN_TIME_PER_BUFFER`] per buffer where that is more.
pub fn return_by(made: Instant, sooner: Instant, buffers: usize) -> Instant {
    let allowance = allowance(made, sooner);
    let to_return = (allowance / 4).max(for_buffers(RETURN_TIME_PER_BUFFER, buffers));
    sooner
        .checked_add(allowance)
        .and_then(|end| end.checked_sub(to_return))
        .unwrap_or(sooner)
}

/// What a planner may take past its time limit, which counts from `made` and ends at
/// `sooner`: 10 % of the limit and 50 ms.
pub fn allowance(made: Instant, sooner: Instant) -> Duration {
    sooner.saturating_duration_since(made) / 10 + Duration::from_millis(50)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_stops_within_the_allowance_less_the_time_to_return() {
        let made = Instant::now();
        let second = made + Duration::from_secs(1);
        // 1 s: 150 ms of allowance; 1,000,000 buffers take 40 ms to return, 1,000 a quarter
        // of the allowance.
        let ms = |at: Instant| at.duration_since(made).as_millis();
        assert_eq!(ms(return_by(made, second, 1_000_000)), 1110);
        assert_eq!(ms(return_by(made, second, 1_000)), 1112);
        // No limit left at all: 50 ms of allowance, less 12.5 ms.
        assert_eq!(
            return_by(made, made, 10).duration_since(made).as_micros(),
            37_500
        );
        // Far deadlines do not overflow.
        let far = made + Duration::from_secs(1 << 40);
        assert!(return_by(made, far, 1) >= far);
    }

    #[test]
    fn time_for_buffers_saturates_instead_of_wrapping() {
        let ns = Duration::from_nanos;
        assert_eq!(for_buffers(ns(40), 1_000_000), Duration::from_millis(40));
        assert_eq!(for_buffers(ns(40), 0), Duration::ZERO);
        // Past u32::MAX buffers the count saturates: the time only grows.
        let most = for_buffers(ns(1), u32::MAX as usize);
        assert_eq!(for_buffers(ns(1), usize::MAX), most);
        assert_eq!(for_buffers(Duration::MAX, 2), Duration::MAX);
    }
}

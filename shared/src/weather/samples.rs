//! Which file and time step a sample of an ERA5 directory starts from: the trainer reads
//! samples by this rule and the server shows them by it, so a sample number means the same
//! map in both.

/// The file and the time step within it of sample `index`, for files of `steps` time steps and
/// a target `dt` steps ahead. The tutorial's rule: wrap the local step into `0..steps − dt` (so
/// the target stays in the file), then move steps below `dt` up by `dt`; steps 0, 1 and the
/// last map to 1 for dt = 1, duplicates the tutorial has too. Needs `steps > dt`.
pub fn sample_position(index: usize, steps: usize, dt: usize) -> (usize, usize) {
    let mut local = index % steps % (steps - dt);
    if local < dt {
        local += dt;
    }
    (index / steps, local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_wrap_inside_their_file_like_the_tutorial() {
        // Files of 4 steps, dt = 1: local steps 0..3 wrap into 0..3, then 0 moves up to 1.
        let steps: Vec<_> = (0..8).map(|i| sample_position(i, 4, 1)).collect();
        assert_eq!(steps, [(0, 1), (0, 1), (0, 2), (0, 1), (1, 1), (1, 1), (1, 2), (1, 1)]);
        // dt = 2 on files of 10 steps: the first two steps move up by 2.
        assert_eq!(sample_position(3, 10, 2), (0, 3));
        assert_eq!(sample_position(0, 10, 2), (0, 2));
        assert_eq!(sample_position(19, 10, 1), (1, 1));
    }
}

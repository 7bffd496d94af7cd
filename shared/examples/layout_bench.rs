//! Time to compute every group of each token for a 65,536-rank world. Run in release:
//! `cargo run --release -p scalebook-shared --example layout_bench`.

use std::hint::black_box;
use std::time::Instant;

use scalebook_shared::layout::{Layout, Sizes, Token};

const REPEATS: u32 = 20;

fn main() -> Result<(), scalebook_shared::Error> {
    let layout = Layout::new(Sizes { tp: 8, cp: 4, dp: 1024, pp: 2 }, "tp-cp-dp-pp")?;
    println!("world {} order {} ({} runs each, best of)", layout.world(), layout.effective_order(), REPEATS);
    for token in Token::ALL {
        let best = (0..REPEATS)
            .map(|_| {
                let start = Instant::now();
                black_box(layout.groups(black_box(token)));
                start.elapsed()
            })
            .min()
            .unwrap_or_default();
        println!("{token:>9}: {:8.3} ms", best.as_secs_f64() * 1e3);
    }
    let start = Instant::now();
    let hovered: usize = (0..layout.world()).map(|rank| layout.group_of(Token::TP_CP, rank).map_or(0, |g| g.len())).sum();
    println!("group_of(tp-cp) for all {} ranks: {:.3} ms ({hovered} ranks listed)", layout.world(), start.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

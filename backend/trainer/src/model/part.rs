//! Which part of the ViT a model holds: all of it, or one chunk of a pipeline. Chunk `c` of
//! `n` holds the blocks `shared::pipeline::chunk_blocks` gives it; the patch and position
//! embedding go with the first chunk, the final norm and the head (and so the loss) with the
//! last. A part's parameters keep the whole model's names, so a checkpoint's keys do not depend
//! on how the model was cut.

use std::ops::Range;

use scalebook_shared::pipeline::chunk_blocks;

use crate::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The patch and position embedding: the input is the fields, not a chunk's activations.
    pub embed: bool,
    /// The blocks, by their index in the whole model.
    pub blocks: Range<usize>,
    /// The final norm and the head: the output is the prediction.
    pub head: bool,
}

impl Part {
    /// The whole model of `depth` blocks.
    pub fn whole(depth: usize) -> Part {
        Part { embed: true, blocks: 0..depth, head: true }
    }

    /// Chunk `chunk` of a model of `depth` blocks cut into `chunks`; an error when it cannot
    /// be cut so (more chunks than blocks), which the config's rules refuse first.
    pub fn chunk(depth: usize, chunks: usize, chunk: usize) -> Result<Part, Error> {
        let blocks = chunk_blocks(depth, chunks).into_iter().nth(chunk).ok_or_else(|| Error::Internal {
            what: "the pipeline's stages".into(),
            message: format!("{depth} blocks cannot be cut into {chunks} chunks with a chunk {chunk}"),
        })?;
        Ok(Part { embed: chunk == 0, blocks, head: chunk + 1 == chunks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cut_the_blocks_with_the_embedding_first_and_the_head_last() {
        let parts: Vec<Part> = (0..4).map(|c| Part::chunk(6, 4, c).unwrap()).collect();
        assert_eq!(parts[0], Part { embed: true, blocks: 0..1, head: false });
        assert_eq!(parts[1], Part { embed: false, blocks: 1..2, head: false });
        assert_eq!(parts[2], Part { embed: false, blocks: 2..4, head: false });
        assert_eq!(parts[3], Part { embed: false, blocks: 4..6, head: true });
        assert_eq!(Part::chunk(4, 1, 0).unwrap(), Part::whole(4));
        assert!(Part::chunk(2, 3, 0).is_err(), "more chunks than blocks");
        assert!(Part::chunk(4, 2, 2).is_err(), "no such chunk");
    }
}

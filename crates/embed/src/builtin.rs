//! The built-in offline embedder: a static embedding table distilled from all-MiniLM-L6-v2
//! (`assets/embedder/`, made by `scripts/distill-embedder`). A text's vector is the mean of its
//! WordPiece tokens' rows, L2-normalised: no transformer runs, no network, and the same text
//! always gets the same vector on every platform.

use std::sync::OnceLock;

use async_trait::async_trait;

use super::wordpiece::WordPiece;
use lore_base::ports::{Embedder, PortError};

/// Stored beside each vector; a new table gets a new id.
pub const MODEL_ID: &str = "lore-static-minilm-l6-256-v1";

/// The table: see `scripts/distill_embedder.py` for the layout.
static ASSET: &[u8] = include_bytes!("../../../assets/embedder/minilm-l6-static-256.bin");

/// SHA-256 of the table (`assets/embedder/minilm-l6-static-256.bin`), also recorded in
/// `assets/embedder/NOTICE`.
pub const ASSET_SHA256: &str = "4ca737ce82f927742863f728d170f997575c2c203e04d1854cecc27c2ed0567f";

/// The table's WordPiece index, made by `build.rs` from [`ASSET`].
static INDEX: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/wordpiece-index.bin"));

const MAGIC: &[u8; 8] = b"LORESTE1";

/// A parsed static embedding table: the tokenizer over its vocabulary, one scale per token
/// and the int8 rows, read in place from the bytes.
pub struct StaticModel<'a> {
    tokenizer: WordPiece<'a>,
    dims: usize,
    /// One little-endian f32 per token, read where it is.
    scales: &'a [u8],
    rows: &'a [u8],
}

/// Why bytes are not a static embedding table.
#[derive(Debug, thiserror::Error)]
#[error("not a lore static embedding table: {0}")]
pub struct FormatError(&'static str);

impl<'a> StaticModel<'a> {
    /// The built-in table from its bytes (the embedded asset's: the WordPiece index it is read
    /// with was made from them at build time).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, FormatError> {
        let mut rest = bytes
            .strip_prefix(MAGIC)
            .ok_or(FormatError("wrong magic"))?;
        let mut take = |n: usize| -> Result<&'a [u8], FormatError> {
            if rest.len() < n {
                return Err(FormatError("truncated"));
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let mut u32_field = || -> Result<usize, FormatError> {
            let b = take(4)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let dims = u32_field()?;
        let vocab_size = u32_field()?;
        let vocab_bytes = u32_field()?;
        let vocab = take(vocab_bytes)?;
        let tokenizer = WordPiece::new(vocab, vocab_size, INDEX).ok_or(FormatError(
            "the vocabulary is not the one its index was made from",
        ))?;
        if tokenizer.len() != vocab_size || dims == 0 {
            return Err(FormatError("header does not match the vocabulary"));
        }
        let scales = take(4 * vocab_size)?;
        let rows = take(vocab_size * dims)?;
        if !rest.is_empty() {
            return Err(FormatError("trailing bytes"));
        }
        Ok(Self {
            tokenizer,
            dims,
            scales,
            rows,
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The normalised mean of the rows of `text`'s known tokens; the zero vector for a text
    /// with none (empty, or only characters the vocabulary cannot spell).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        self.tokenizer.encode(text, &mut ids);
        let mut sum = vec![0f32; self.dims];
        let unk = self.tokenizer.unk();
        for &id in ids.iter().filter(|&&id| id != unk) {
            let id = id as usize;
            let b = &self.scales[4 * id..4 * id + 4];
            let scale = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let row = &self.rows[id * self.dims..(id + 1) * self.dims];
            for (acc, &q) in sum.iter_mut().zip(row) {
                *acc += scale * f32::from(q as i8);
            }
        }
        // The mean's direction is the sum's: normalising the sum is enough.
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            sum.iter_mut().for_each(|x| *x /= norm);
        }
        sum
    }
}

/// The built-in model, parsed once per process and shared by every core instance.
fn model() -> &'static StaticModel<'static> {
    static MODEL: OnceLock<StaticModel<'static>> = OnceLock::new();
    MODEL.get_or_init(|| StaticModel::parse(ASSET).expect("the built-in embedding table parses"))
}

#[cfg(test)]
pub(crate) fn tokenizer() -> &'static WordPiece<'static> {
    &model().tokenizer
}

/// Appends the WordPiece ids of `text` in the built-in vocabulary (all-MiniLM-L6-v2's, so the
/// transformer embedder tokenizes with it).
pub fn encode(text: &str, out: &mut Vec<u32>) {
    model().tokenizer.encode(text, out);
}

/// The number of tokens of the built-in vocabulary.
pub fn vocabulary_size() -> usize {
    model().tokenizer.len()
}

/// [`Embedder`] over the built-in table, parsed on first use.
#[derive(Clone, Copy, Default)]
pub struct BuiltinEmbedder;

impl BuiltinEmbedder {
    /// The built-in embedder. Free to make: the first embedding in a process opens the table
    /// (header checks; the rows, scales and vocabulary index are read in place), which every
    /// thread then shares.
    pub fn new() -> Self {
        Self
    }

    /// One text's vector, without the async port.
    pub fn embed_text(&self, text: &str) -> Vec<f32> {
        model().embed(text)
    }
}

#[async_trait(?Send)]
impl Embedder for BuiltinEmbedder {
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn dimensions(&self) -> usize {
        model().dims
    }

    fn is_quick(&self) -> bool {
        true
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        let model = model();
        Ok(texts.iter().map(|t| model.embed(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn asset_is_the_recorded_one() {
        let digest = Sha256::digest(ASSET);
        let hex = lore_base::keys::to_hex(&digest);
        assert_eq!(
            hex, ASSET_SHA256,
            "update ASSET_SHA256 and assets/embedder/NOTICE"
        );
    }

    #[test]
    fn vectors_are_unit_length_deterministic_and_256_wide() {
        let embedder = BuiltinEmbedder::new();
        assert_eq!(embedder.dimensions(), 256);
        assert_eq!(embedder.model_id(), MODEL_ID);
        let texts = vec![
            "Dana owns billing".to_string(),
            "Dana owns billing".to_string(),
        ];
        let vectors = futures_executor::block_on(embedder.embed(&texts)).unwrap();
        assert_eq!(vectors[0], vectors[1]);
        assert_eq!(vectors[0].len(), 256);
        let norm = cosine(&vectors[0], &vectors[0]);
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }

    /// The first coordinates of vectors computed from the asset by numpy (the distillation
    /// script's tokenizer, rows dequantised, summed and normalised): the runtime reads the
    /// table as it was written. A change here changes every stored vector: new MODEL_ID.
    #[test]
    fn vectors_match_the_distillation_scripts() {
        let cases: [(&str, [f32; 6]); 3] = [
            (
                "who owns billing?",
                [-0.191487, 0.09942, -0.037445, 0.004998, 0.194432, -0.038513],
            ),
            (
                "Dana is responsible for invoices and payments",
                [-0.01341, 0.134104, -0.145788, -0.014079, 0.094736, 0.014457],
            ),
            (
                "Héllo, wörld!",
                [-0.098868, 0.122919, -0.141025, 0.190423, 0.076705, 0.012423],
            ),
        ];
        for (text, expected) in cases {
            let vector = BuiltinEmbedder::new().embed_text(text);
            for (got, want) in vector.iter().zip(expected) {
                assert!((got - want).abs() < 2e-6, "{text:?}: {:?}", &vector[..6]);
            }
        }
    }

    #[test]
    fn other_bytes_are_refused() {
        assert!(StaticModel::parse(b"not a table").is_err());
        assert!(StaticModel::parse(&ASSET[..ASSET.len() - 1]).is_err());
        let mut longer = ASSET.to_vec();
        longer.push(0);
        assert!(StaticModel::parse(&longer).is_err());
    }

    #[test]
    fn a_text_without_known_tokens_is_the_zero_vector() {
        let embedder = BuiltinEmbedder::new();
        for text in ["", "   ", "\u{7}", "ＡＢＣ"] {
            assert!(
                embedder.embed_text(text).iter().all(|&x| x == 0.0),
                "{text:?}"
            );
        }
    }

    /// Each query of `scripts/embedder-eval.tsv` ranks every memory of the file: the pairs
    /// share few words, so this checks meaning, not word overlap. The thresholds sit a little
    /// under what the table scores (`cargo run --release --example embed_bench`: MRR 0.61,
    /// related 0.31 vs unrelated 0.10; the full model scores MRR 0.88).
    #[test]
    fn queries_find_the_memories_that_answer_them() {
        let embedder = BuiltinEmbedder::new();
        let pairs: Vec<(&str, &str)> = include_str!("../../../scripts/embedder-eval.tsv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.split_once('\t'))
            .collect();
        let queries: Vec<_> = pairs.iter().map(|(q, _)| embedder.embed_text(q)).collect();
        let memories: Vec<_> = pairs.iter().map(|(_, m)| embedder.embed_text(m)).collect();
        let n = pairs.len() as f32;
        let (mut related, mut unrelated, mut reciprocal_ranks) = (0.0, 0.0, 0.0);
        for (i, query) in queries.iter().enumerate() {
            let own = cosine(query, &memories[i]);
            let mut rank = 1;
            for (j, memory) in memories.iter().enumerate() {
                let sim = cosine(query, memory);
                if j == i {
                    related += sim / n;
                } else {
                    unrelated += sim / (n * (n - 1.0));
                    rank += usize::from(sim > own);
                }
            }
            reciprocal_ranks += 1.0 / rank as f32 / n;
        }
        assert!(reciprocal_ranks > 0.55, "MRR {reciprocal_ranks}");
        assert!(
            related > unrelated + 0.15,
            "related {related}, unrelated {unrelated}"
        );
        // The example of issue 8.
        let billing = embedder.embed_text("who owns billing?");
        let dana = embedder.embed_text("Dana is responsible for invoices and payments");
        let sim = cosine(&billing, &dana);
        assert!(sim > 0.4, "{sim}");
        for other in [
            "The summit takes place in Lisbon",
            "The forecast calls for showers on Thursday",
        ] {
            assert!(
                cosine(&billing, &embedder.embed_text(other)) < sim - 0.2,
                "{other}"
            );
        }
    }
}

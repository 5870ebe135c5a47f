//! BERT's uncased WordPiece tokenizer: text to vocabulary ids, split as the tokenizer of the
//! model the built-in embedder was distilled from splits it (the tests compare with Hugging
//! Face `tokenizers` on that model's `tokenizer.json`).
//!
//! Written by hand rather than with the `tokenizers` crate: that crate brings regex engines,
//! `onig` (C) and `esaxx` (C++) by default, rayon, and models for every tokenizer family, and
//! does not build for wasm32 with its defaults; this is the one algorithm the embedder needs,
//! over the Unicode tables the core already depends on.

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Words longer than this (in characters) become `[UNK]`, as in BERT.
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary and the rules that split text into its tokens. Tokens are found by
/// binary search over an index made at build time (`build.rs`), read in place: a Spin request
/// opens the table afresh for every query it embeds, so opening it must cost nothing (a hash
/// map of the 30,522 tokens took ~2 ms of every such request in wasm).
pub struct WordPiece<'a> {
    /// The tokens in id order, one per line.
    vocab: &'a [u8],
    /// `n + 1` little-endian u32 byte offsets into `vocab`: token `i` is
    /// `vocab[offset(i)..offset(i + 1) - 1]`.
    offsets: &'a [u8],
    /// The ids of the distinct tokens in the byte order of their tokens, little-endian u32.
    sorted: &'a [u8],
    unk: u32,
}

fn u32_at(bytes: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([
        bytes[4 * i],
        bytes[4 * i + 1],
        bytes[4 * i + 2],
        bytes[4 * i + 3],
    ])
}

impl<'a> WordPiece<'a> {
    /// A tokenizer over `vocab` (`tokens` tokens in id order, one per line, continuations
    /// spelled `##piece`) with its `index` as `build.rs` writes it, which must contain
    /// `[UNK]`. `None` when the index does not describe the vocabulary.
    pub fn new(vocab: &'a [u8], tokens: usize, index: &'a [u8]) -> Option<Self> {
        let offsets_len = 4 * (tokens + 1);
        if index.len() < offsets_len || !index.len().is_multiple_of(4) {
            return None;
        }
        let (offsets, sorted) = index.split_at(offsets_len);
        if u32_at(offsets, tokens) as usize != vocab.len() + 1 {
            return None;
        }
        let mut piece = Self {
            vocab,
            offsets,
            sorted,
            unk: 0,
        };
        piece.unk = piece.id("[UNK]")?;
        Some(piece)
    }

    /// The token whose id is `id`.
    fn token(&self, id: u32) -> &'a [u8] {
        let id = id as usize;
        let (start, end) = (u32_at(self.offsets, id), u32_at(self.offsets, id + 1));
        &self.vocab[start as usize..end as usize - 1]
    }

    /// The id of `token`, if it is in the vocabulary.
    fn id(&self, token: &str) -> Option<u32> {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            let id = u32_at(self.sorted, mid);
            match self.token(id).cmp(token.as_bytes()) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(id),
            }
        }
        None
    }

    /// The id of `[UNK]`, which stands for a word the vocabulary cannot spell.
    pub fn unk(&self) -> u32 {
        self.unk
    }

    /// How many distinct tokens the vocabulary has.
    pub fn len(&self) -> usize {
        self.sorted.len() / 4
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Appends the ids of `text` to `out` (no `[CLS]`/`[SEP]`).
    pub fn encode(&self, text: &str, out: &mut Vec<u32>) {
        let mut buffers = Buffers::default();
        for c in text.chars() {
            if is_whitespace(c) {
                self.encode_word(&mut buffers, out);
            } else if is_cjk(c) {
                // Every CJK ideograph is a word of its own.
                self.encode_word(&mut buffers, out);
                buffers.raw.push(c);
                self.encode_word(&mut buffers, out);
            } else if !is_dropped(c) {
                buffers.raw.push(c);
            }
        }
        self.encode_word(&mut buffers, out);
    }

    /// Encodes the word gathered in `buffers.raw` (if any) and empties it: lowercase, accents
    /// stripped, split around punctuation, each part in word pieces.
    fn encode_word(&self, buffers: &mut Buffers, out: &mut Vec<u32>) {
        if buffers.raw.is_empty() {
            return;
        }
        let word = &mut buffers.word;
        word.clear();
        if buffers.raw.is_ascii() {
            word.push_str(&buffers.raw);
            word.make_ascii_lowercase();
        } else {
            // Lowercase character by character (as Hugging Face's BERT normaliser does: no
            // final sigma), then decompose and drop the nonspacing marks (the accents).
            word.extend(
                buffers
                    .raw
                    .chars()
                    .flat_map(char::to_lowercase)
                    .nfd()
                    .filter(|&c| !is_nonspacing_mark(c)),
            );
        }
        buffers.raw.clear();
        let mut start = 0;
        for (i, c) in word.char_indices() {
            if is_punctuation(c) {
                if start < i {
                    self.word_pieces(&word[start..i], &mut buffers.piece, out);
                }
                let end = i + c.len_utf8();
                self.word_pieces(&word[i..end], &mut buffers.piece, out);
                start = end;
            }
        }
        if start < word.len() {
            self.word_pieces(&word[start..], &mut buffers.piece, out);
        }
    }

    /// Greedy longest-match-first: the longest prefix in the vocabulary, then the longest
    /// `##` continuation, and so on; a word with any unmatched rest is one `[UNK]`.
    fn word_pieces(&self, word: &str, piece: &mut String, out: &mut Vec<u32>) {
        if word.chars().count() > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        let start_len = out.len();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                let candidate = if start == 0 {
                    &word[..end]
                } else {
                    piece.clear();
                    piece.push_str("##");
                    piece.push_str(&word[start..end]);
                    piece.as_str()
                };
                if let Some(id) = self.id(candidate) {
                    found = Some(id);
                    break;
                }
                // Back off one character, not one byte.
                end = word[..end]
                    .char_indices()
                    .next_back()
                    .map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(start_len);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

/// Reused strings: the word being gathered, its normalised form, and the `##` candidate.
#[derive(Default)]
struct Buffers {
    raw: String,
    word: String,
    piece: String,
}

/// BERT's whitespace: space, tab, newline, carriage return, and Unicode's space, line and
/// paragraph separators (other controls are dropped, not split on).
fn is_whitespace(c: char) -> bool {
    if c.is_ascii() {
        return matches!(c, ' ' | '\t' | '\n' | '\r');
    }
    matches!(
        get_general_category(c),
        GeneralCategory::SpaceSeparator
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// NUL, the replacement character, and Unicode's "other" categories (controls, format
/// characters, unassigned, private use, surrogates).
fn is_dropped(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c == '\u{fffd}'
        || matches!(
            get_general_category(c),
            GeneralCategory::Control
                | GeneralCategory::Format
                | GeneralCategory::Unassigned
                | GeneralCategory::PrivateUse
                | GeneralCategory::Surrogate
        )
}

fn is_nonspacing_mark(c: char) -> bool {
    !c.is_ascii() && get_general_category(c) == GeneralCategory::NonspacingMark
}

/// ASCII symbols count as punctuation (`$`, `+`, `^`...), as in BERT, besides Unicode's `P*`.
fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::ConnectorPunctuation
            | GeneralCategory::DashPunctuation
            | GeneralCategory::OpenPunctuation
            | GeneralCategory::ClosePunctuation
            | GeneralCategory::InitialPunctuation
            | GeneralCategory::FinalPunctuation
            | GeneralCategory::OtherPunctuation
    )
}

/// The CJK Unified Ideographs blocks BERT splits into single characters (not Hangul, kana).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    /// Ids from Hugging Face `tokenizers` 0.23 with all-MiniLM-L6-v2's `tokenizer.json`
    /// (`encode(text, add_special_tokens=False)`), the tokenizer the model was trained with.
    #[test]
    fn encodes_as_the_reference_tokenizer() {
        let cases: &[(&str, &[u32])] = &[
            ("who owns billing?", &[2040, 8617, 25640, 1029]),
            (
                "Dana is responsible for invoices and payments",
                &[11271, 2003, 3625, 2005, 1999, 6767, 23522, 1998, 10504],
            ),
            (
                "Héllo, wörld! naïve café",
                &[7592, 1010, 2088, 999, 15743, 7668],
            ),
            (
                "東京タワー and 한국어",
                &[
                    1879, 1755, 1709, 30262, 30265, 1998, 1469, 30006, 30021, 29991, 30014, 30020,
                    29999, 30008,
                ],
            ),
            (
                "\u{201c}quotes\u{201d} it's e.g. U.S.A.",
                &[
                    1523, 16614, 1524, 2009, 1005, 1055, 1041, 1012, 1043, 1012, 1057, 1012, 1055,
                    1012, 1037, 1012,
                ],
            ),
            (
                "zero\u{200b}width\u{a0}nbsp\ttab\nline",
                &[5717, 9148, 11927, 2232, 1050, 5910, 2361, 21628, 2240],
            ),
            (
                "ＡＢＣ \u{fb01}le İstanbul ΟΔΥΣΣΕΥΣ",
                &[
                    100, 1984, 2571, 9960, 1169, 29722, 29735, 29733, 29733, 29723, 29735, 29733,
                ],
            ),
            (
                "supercalifragilistic",
                &[3565, 9289, 10128, 29181, 24411, 4588],
            ),
            (
                "$100 + 5% ^_^",
                &[1002, 2531, 1009, 1019, 1003, 1034, 1035, 1034],
            ),
            ("", &[]),
            ("   ", &[]),
            ("\u{0}\u{fffd}\u{7}", &[]),
        ];
        let tokenizer = crate::builtin::tokenizer();
        for (text, expected) in cases {
            let mut ids = Vec::new();
            tokenizer.encode(text, &mut ids);
            assert_eq!(&ids, expected, "{text:?}");
        }
    }

    /// The build-time index finds every token of the vocabulary under the id a map filled in
    /// id order gives it, and nothing that is not a token.
    #[test]
    fn the_index_finds_every_token() {
        let tokenizer = crate::builtin::tokenizer();
        let vocab = std::str::from_utf8(tokenizer.vocab).unwrap();
        let mut by_token = std::collections::HashMap::new();
        for (id, token) in vocab.split('\n').enumerate() {
            by_token.insert(token, id as u32);
        }
        assert_eq!(by_token.len(), tokenizer.len());
        for (token, id) in &by_token {
            assert_eq!(tokenizer.id(token), Some(*id), "{token:?}");
        }
        for absent in ["", "##", "billingx", "\u{10ffff}", "[unk]"] {
            assert_eq!(tokenizer.id(absent), None, "{absent:?}");
        }
    }

    #[test]
    fn a_word_over_100_characters_is_unknown() {
        let tokenizer = crate::builtin::tokenizer();
        let mut ids = Vec::new();
        tokenizer.encode(&"x".repeat(101), &mut ids);
        assert_eq!(ids, [tokenizer.unk()]);
        ids.clear();
        tokenizer.encode(&"x".repeat(100), &mut ids);
        assert!(!ids.contains(&tokenizer.unk()));
    }
}

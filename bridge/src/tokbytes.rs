//! The bytes each token stands for, read from a loaded tokenizer, for llguidance's token trie.
//! Byte-level BPE (GPT-2's byte→unicode map) and SentencePiece (`<0xNN>` byte fallback, `▁` for
//! a space) are understood; anything else fails here, at load, with the decoder named.

use std::collections::HashMap;

use serde_json::Value;
use tokenizers::Tokenizer;
use toktrie::{TokRxInfo, TokTrie, TokenId, TokenizerEnv};

/// How the tokenizer's decoder turns vocabulary strings into bytes.
#[derive(Default, Debug)]
struct DecoderKind {
    byte_level: bool,
    byte_fallback: bool,
    /// The character a SentencePiece vocabulary writes for a space (`▁`), when it is replaced.
    space: Option<char>,
}

fn scan_decoder(d: &Value, kind: &mut DecoderKind) {
    match d["type"].as_str() {
        Some("ByteLevel") => kind.byte_level = true,
        Some("ByteFallback") => kind.byte_fallback = true,
        Some("Metaspace") => {
            kind.space = d["replacement"].as_str().and_then(|s| s.chars().next()).or(Some('▁'))
        }
        Some("Replace") if d["content"].as_str() == Some(" ") => {
            if let Some(s) = d["pattern"]["String"].as_str() {
                let mut chars = s.chars();
                if let (Some(c), None) = (chars.next(), chars.next()) {
                    kind.space = Some(c);
                }
            }
        }
        Some("Sequence") => {
            for inner in d["decoders"].as_array().into_iter().flatten() {
                scan_decoder(inner, kind);
            }
        }
        _ => {}
    }
}

/// GPT-2's map from the printable stand-in characters back to bytes.
fn byte_level_map() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut map = HashMap::with_capacity(256);
    let mut next = 0x100u32;
    for b in 0..=255u8 {
        if printable(b) {
            map.insert(b as char, b);
        } else {
            map.insert(char::from_u32(next).expect("valid char"), b);
            next += 1;
        }
    }
    map
}

fn byte_fallback_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// Bytes of every id below `vocab_size` (ids the tokenizer lacks stay empty: never allowed).
pub fn token_bytes(tok: &Tokenizer, vocab_size: usize) -> Result<Vec<Vec<u8>>, String> {
    let decoder = serde_json::to_value(tok.get_decoder()).map_err(|e| e.to_string())?;
    let mut kind = DecoderKind::default();
    scan_decoder(&decoder, &mut kind);
    if !kind.byte_level && !kind.byte_fallback && kind.space.is_none() {
        return Err(format!(
            "structured output: the tokenizer's decoder {} is not supported (known: ByteLevel, \
             ByteFallback, Metaspace or Replace '▁' -> ' ')",
            decoder["type"].as_str().map_or_else(|| decoder.to_string(), |s| format!("'{s}'"))
        ));
    }
    let map = byte_level_map();
    let mut out = vec![Vec::new(); vocab_size];
    let added = tok.get_added_tokens_decoder();
    for (piece, id) in tok.get_vocab(false) {
        let Some(slot) = out.get_mut(id as usize) else { continue };
        if added.contains_key(&id) {
            continue;
        }
        *slot = if kind.byte_level {
            piece
                .chars()
                .map(|c| map.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| {
                    format!("structured output: byte-level token {id} {piece:?} has a character outside the byte map")
                })?
        } else if let Some(b) = kind.byte_fallback.then(|| byte_fallback_token(&piece)).flatten() {
            vec![b]
        } else {
            match kind.space {
                Some(sp) => piece.replace(sp, " ").into_bytes(),
                None => piece.into_bytes(),
            }
        };
    }
    for (id, t) in added {
        if let Some(slot) = out.get_mut(id as usize) {
            let mut bytes = t.content.as_bytes().to_vec();
            if t.special {
                bytes.insert(0, TokTrie::SPECIAL_TOKEN_MARKER);
            }
            *slot = bytes;
        }
    }
    Ok(out)
}

/// llguidance's view of one model's tokenizer: the trie plus our tokenizer for text it forces.
pub struct HfTokEnv {
    trie: TokTrie,
    tok: Tokenizer,
}

impl HfTokEnv {
    pub fn new(tok: &Tokenizer, eos: &[u32], vocab_size: usize) -> Result<Self, String> {
        let vocab_size = vocab_size.max(tok.get_vocab_size(true));
        if eos.is_empty() {
            return Err("structured output: no EOS token id".into());
        }
        if let Some(bad) = eos.iter().find(|&&e| e as usize >= vocab_size) {
            return Err(format!("structured output: EOS id {bad} is outside the vocabulary ({vocab_size})"));
        }
        let words = token_bytes(tok, vocab_size)?;
        let info = TokRxInfo::new(vocab_size as u32, eos[0]);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(eos);
        Ok(HfTokEnv { trie, tok: tok.clone() })
    }
}

impl TokenizerEnv for HfTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |text| {
            self.tok.encode(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default()
        })
    }
}

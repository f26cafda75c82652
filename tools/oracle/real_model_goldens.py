"""mlx-lm's logits on the real SmolLM2-135M-Instruct snapshot (converted from the PyPI GGUF by
`mlxcpp convert`, see tools/fetch_models.sh), in parity mode (float32):

  chat_prompt   [L]        ids of a chat prompt (transformers' apply_chat_template)
  chat_logits   [L, V]     prefill logits at every position
  greedy_tokens [32]       32 greedy steps after the prefill
  greedy_logits [32, V]    the logits of each step
  text_ids      [512]      natural text (below) tokenized without special tokens, for the
                           fast-vs-parity comparison (teacher forcing)

Usage: real_model_goldens.py GOLDEN_DIR [MODELS_DIR]  (writes GOLDEN_DIR/real/smollm2.safetensors)
"""
import sys
from pathlib import Path

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model
from transformers import AutoTokenizer

TEXT = (
    "The river had been rising for three days before anyone in the village thought to move the "
    "grain. Old Tomas, who kept the mill at the bend, said he had seen it worse in the spring of "
    "his tenth year, when the water reached the second step of the church and the priest held "
    "mass from a boat. Nobody believed him, but nobody argued either, because arguing with Tomas "
    "took longer than the rain. On the fourth morning the bridge went. It did not fall so much as "
    "lean, slowly, like a tired horse settling into straw, and then the current took the middle "
    "span and carried it around the bend toward the mill. The children ran along the bank to "
    "watch it go. Their mothers called them back, and then, because the sight was too strange to "
    "miss, followed them. By noon the whole village stood on the hill above the square, counting "
    "what the water had taken: the bridge, two carts, the baker's shed, a line of washing that "
    "still flapped as it floated past. The schoolteacher wrote the numbers in a notebook. She had "
    "a theory that a flood, like a fever, had a shape, and that if you measured it carefully "
    "enough you could tell when it would break. Her measurements said it would break on the "
    "sixth day. It broke on the fifth, in the night, and in the morning the river was brown and "
    "slow and ordinary again, and the mill wheel turned as if nothing had happened. Tomas said "
    "he had known all along. In the weeks after, the village rebuilt the bridge with stone "
    "instead of timber, and the schoolteacher added a page to her notebook titled 'What the "
    "river taught us', which listed, in her neat hand, the heights of the water at every hour, "
    "the names of the families who had taken in their neighbours, and the price of grain before "
    "and after. Years later, when the notebook was found in the attic of the school, a student "
    "copied the list into a computer and plotted it, and the curve of the water and the curve of "
    "the price rose and fell together, a day apart, as if the market had been watching the river "
    "too. The student wrote a short essay about it for a history prize. It did not win, but the "
    "judges mentioned it, and the essay was printed in the regional paper under the headline "
    "'The Flood That Kept Its Own Books'. Tomas's grandson read it aloud at the mill, and the "
    "old men who sat there in the afternoons nodded and said they remembered, though most of "
    "them had been born after the flood and remembered only the stories, which by then had "
    "grown taller than the water ever was. Such is the way with rivers and with villages: each "
    "keeps the other's memory, and neither keeps it exactly."
)


def main(out, models="models"):
    path = Path(models) / "SmolLM2-135M-Instruct"
    if not (path / "config.json").exists():
        sys.exit(f"real_model_goldens: {path} is missing (run `make models-smollm2`)")
    model, _ = load_model(path)
    model.set_dtype(mx.float32)
    tok = AutoTokenizer.from_pretrained(str(path))
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(prompt, dict) or hasattr(prompt, "input_ids"):
        prompt = prompt["input_ids"]
    prompt = mx.array(prompt, dtype=mx.int32)
    cache = make_prompt_cache(model)
    logits = model(prompt[None], cache=cache)[0]
    g = {"chat_prompt": prompt, "chat_logits": logits}
    y = int(mx.argmax(logits[-1]).item())
    toks, steps = [], []
    for _ in range(32):
        toks.append(y)
        step = model(mx.array([[y]], dtype=mx.int32), cache=cache)[0, -1]
        steps.append(step)
        y = int(mx.argmax(step).item())
    g["greedy_tokens"] = mx.array(toks, dtype=mx.int32)
    g["greedy_logits"] = mx.stack(steps)
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    assert len(ids) >= 512, len(ids)
    g["text_ids"] = mx.array(ids[:512], dtype=mx.int32)
    (Path(out) / "real").mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(Path(out) / "real" / "smollm2.safetensors"), g)
    print(f"real: prompt {prompt.size} tokens, greedy {toks[:8]}...")


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Train the strata demo model: a small Qwen3-MoE on the Go standard library's source.

Runs on a GPU machine with PyTorch, transformers 5.x, tokenizers and safetensors (the H200
machine of the device tool); it is not part of the Go build. The corpus comes from `go run ./tools/demo-model/corpus` (gzipped JSONL, one
{"path", "text"} object a line, split into train and valid by package).

    python3 tools/demo-model/train.py --corpus .dev/demo-corpus --out $OUT \
        --heldout-text models/demo/testdata/heldout.txt --budget-s 300 --smoke-s 20

Stages, each logged with its wall time:
  1. smoke: the whole pipeline on a small slice with a --smoke-s training budget (tokenizer,
     model, training, save in the hub layout, reload and logit check, evaluation, sampling),
     so that an error shows in the first minute rather than after the main run; its files
     are deleted afterwards.
  2. main: a byte-level BPE tokenizer trained on the training split, the model trained for
     --budget-s seconds of wall time, then the checkpoint saved to OUT/ckpt in Hugging Face
     hub layout (one tensor per expert, like the released Qwen3-MoE checkpoints; float16),
     reloaded with transformers and checked against the trained weights, and evaluated in
     float32 on the held-out packages and on the held-out text file.

The checkpoint's model.safetensors is split into parts of at most 16,000,000 bytes
(model.safetensors.part-NN) so that it comes back from the device machine; `cat` joins them
and OUT/metrics.json records the joined file's sha256.
"""

import argparse
import gzip
import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

# Qwen2/Qwen3's pre-tokenizer split pattern (from their tokenizer.json).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PART_BYTES = 16_000_000

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------- data


def read_jsonl_gz(path):
    docs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append((d["path"], d["text"]))
    if not docs:
        sys.exit(f"{path}: no documents")
    return docs


# ---------------------------------------------------------------- tokenizer


def train_tokenizer(texts, vocab_size):
    """Byte-level BPE in Qwen2's layout: NFC, the Qwen2 split regex, byte-level mapping,
    merges learned here, and the special tokens appended after the learned vocabulary."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIALS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_special_tokens(SPECIALS)
    # Pin the non-model parts to exactly what Qwen's tokenizer.json has.
    d = json.loads(tok.to_str())
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    d["normalizer"] = {"type": "NFC"}
    d["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
            dict(bl),
        ],
    }
    d["post_processor"] = dict(bl)
    d["decoder"] = dict(bl)
    tok = Tokenizer.from_str(json.dumps(d, ensure_ascii=False))
    for i, s in enumerate(SPECIALS):
        want = tok.get_vocab_size() - len(SPECIALS) + i
        if tok.token_to_id(s) != want:
            sys.exit(f"tokenizer: {s} has id {tok.token_to_id(s)}, want {want}")
    probe = "func reverse(s string) string {\n\tr := []rune(s) // ünïcode ✓\n}\n"
    if tok.decode(tok.encode(probe).ids) != probe:
        sys.exit("tokenizer: encode/decode round trip failed")
    return tok


def tokenizer_config(tok, max_len):
    added = {}
    for s in SPECIALS:
        added[str(tok.token_to_id(s))] = {
            "content": s,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def encode_stream(tok, texts, eot):
    """All documents as one token stream, each followed by <|endoftext|>."""
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.int32)


# ---------------------------------------------------------------- model


def hub_config(a, vocab, eot):
    """config.json in the layout of the released Qwen3-MoE checkpoints (num_experts,
    rope_theta at the top level), which transformers 5 reads as it is."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": vocab,
        "hidden_size": a.hidden,
        "intermediate_size": a.hidden * 3,  # unused: every layer is sparse
        "moe_intermediate_size": a.expert_ffn,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.head_dim,
        "num_experts": a.experts,
        "num_experts_per_tok": a.top_k,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-06,
        "rope_theta": a.rope_theta,
        "rope_scaling": None,
        "max_position_embeddings": a.ctx,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": a.layers,
        "tie_word_embeddings": True,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "initializer_range": 0.02,
        "router_aux_loss_coef": a.aux_coef,
        "output_router_logits": False,
        "use_cache": True,
        "torch_dtype": "float16",
    }


def build_model(cfg_dict, device):
    from transformers import AutoConfig, AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg_dict, f)
        config = AutoConfig.from_pretrained(d)
    try:
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    except (TypeError, ValueError) as e:
        log("from_config(attn_implementation=sdpa) failed, using the default:", e)
        model = AutoModelForCausalLM.from_config(config)
    model = model.to(device=device, dtype=torch.float32)
    c = model.config
    experts = getattr(c, "num_local_experts", None) or getattr(c, "num_experts", None)
    if experts != cfg_dict["num_experts"]:
        sys.exit(f"config: transformers read {experts} experts, want {cfg_dict['num_experts']}")
    inv = next(b for n, b in model.named_buffers() if n.endswith("inv_freq")).float().cpu()
    want = 1.0 / cfg_dict["rope_theta"] ** (2.0 / cfg_dict["head_dim"])
    if abs(inv[1].item() - want) > 1e-6 * max(1.0, want):
        sys.exit(f"config: rope inv_freq[1] = {inv[1].item()}, want {want} (rope_theta not read)")
    if model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
        sys.exit("config: embeddings are not tied")
    return model


def count_params(model):
    seen, n = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            n += p.numel()
    return n


def set_experts_impl(model, impl):
    """Selects transformers' experts backend; returns what the config holds afterwards."""
    try:
        model.config._experts_implementation = impl
    except Exception as e:  # noqa: BLE001 - any refusal means: keep the default
        log(f"experts implementation {impl!r} refused: {e}")
    return getattr(model.config, "_experts_implementation", None)


# ---------------------------------------------------------------- training


def lm_loss(model, chunk, with_aux):
    x, y = chunk[:, :-1], chunk[:, 1:]
    out = model(input_ids=x, output_router_logits=with_aux, use_cache=False)
    ce = F.cross_entropy(out.logits.float().reshape(-1, out.logits.size(-1)), y.reshape(-1))
    aux = getattr(out, "aux_loss", None) if with_aux else None
    return ce, aux


def batch_from(stream, n, ctx, gen, device):
    starts = torch.randint(0, stream.numel() - ctx - 1, (n,), generator=gen, device=device)
    idx = starts[:, None] + torch.arange(ctx + 1, device=device)[None, :]
    return stream[idx].long()


def windows(stream, ctx):
    """Consecutive (ctx+1)-token windows overlapping by one token: every token after the
    first is predicted exactly once, each with up to ctx tokens of context from its window."""
    n = (stream.numel() - 1) // ctx
    w = [stream[i * ctx : i * ctx + ctx + 1] for i in range(n)]
    rest = stream[n * ctx :]
    if rest.numel() >= 2:
        w.append(rest)
    return w


@torch.no_grad()
def eval_nll(model, stream, ctx, device, bf16, max_windows=None, batch=16):
    """Sum of next-token NLL (nats) and the number of predicted tokens."""
    model.eval()
    ws = windows(stream, ctx)
    if max_windows:
        ws = ws[:max_windows]
    total, count = 0.0, 0
    for i in range(0, len(ws), batch):
        group = ws[i : i + batch]
        full = [w for w in group if w.numel() == ctx + 1]
        parts = ([torch.stack(full)] if full else []) + [w[None] for w in group if w.numel() != ctx + 1]
        for chunk in parts:
            chunk = chunk.to(device).long()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                logits = model(input_ids=chunk[:, :-1], use_cache=False).logits
            nll = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), chunk[:, 1:].reshape(-1), reduction="sum")
            total += nll.item()
            count += chunk[:, 1:].numel()
    model.train()
    return total, count


def train(model, stream, a, budget_s, device, val_stream, tag):
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
        fused=True,
    )
    gen = torch.Generator(device=device)
    gen.manual_seed(a.seed)
    model.train()
    step, tokens, t_start = 0, 0, time.time()
    last_log, last_val = t_start, t_start
    history = []
    aux_missing_logged = False
    while True:
        elapsed = time.time() - t_start
        if elapsed >= budget_s:
            break
        frac = elapsed / budget_s
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.1 + 0.45 * (1.0 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        chunk = batch_from(stream, a.batch, a.ctx, gen, device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            ce, aux = lm_loss(model, chunk, with_aux=a.aux_coef > 0)
        loss = ce
        if aux is not None:
            loss = ce + a.aux_coef * aux.float()
        elif a.aux_coef > 0 and not aux_missing_logged:
            log("warning: the model returned no aux_loss; training without the load-balancing term")
            aux_missing_logged = True
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        tokens += a.batch * a.ctx
        now = time.time()
        if now - last_log >= a.log_every_s or step == 1:
            rate = tokens / (now - t_start)
            auxv = aux.item() if aux is not None else float("nan")
            log(f"{tag} step {step} loss {ce.item():.4f} aux {auxv:.3f} lr {lr:.2e} gnorm {gnorm.item():.2f} tok/s {rate:,.0f}")
            history.append({"step": step, "t": round(now - t_start, 1), "loss": round(ce.item(), 4), "lr": lr})
            last_log = now
        if val_stream is not None and now - last_val >= a.val_every_s:
            tot, cnt = eval_nll(model, val_stream, a.ctx, device, bf16=True, max_windows=32)
            log(f"{tag} step {step} val loss (first 32 windows, bf16) {tot / cnt:.4f}")
            history.append({"step": step, "t": round(now - t_start, 1), "val_loss_quick": round(tot / cnt, 4)})
            last_val = time.time()
    wall = time.time() - t_start
    log(f"{tag} trained {step} steps, {tokens:,} tokens in {wall:.1f} s ({tokens / wall:,.0f} tok/s)")
    return {"steps": step, "tokens": tokens, "wall_s": round(wall, 1), "history": history}


def pick_experts_impl(model, stream, a, device):
    """Times a few training-shaped steps with each experts backend that works under bf16
    autocast and keeps the fastest; the eager loop always works."""
    gen = torch.Generator(device=device)
    gen.manual_seed(1)
    chunk = batch_from(stream, a.batch, a.ctx, gen, device)
    results = {}
    ref = None
    for impl in ["eager", "grouped_mm"]:
        if set_experts_impl(model, impl) != impl:
            continue
        try:
            times = []
            for i in range(4):
                torch.cuda.synchronize()
                t = time.time()
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    ce, _ = lm_loss(model, chunk, with_aux=False)
                ce.backward()
                torch.cuda.synchronize()
                times.append(time.time() - t)
            model.zero_grad(set_to_none=True)
            if ref is None:
                ref = ce.item()
            elif abs(ce.item() - ref) > 2e-2:
                log(f"experts {impl}: loss {ce.item():.4f} differs from eager {ref:.4f}; not used")
                continue
            results[impl] = min(times[1:])
            log(f"experts {impl}: {results[impl] * 1000:.1f} ms per forward+backward, loss {ce.item():.4f}")
        except Exception as e:  # noqa: BLE001 - a backend that fails is simply not chosen
            model.zero_grad(set_to_none=True)
            log(f"experts {impl}: failed: {type(e).__name__}: {str(e)[:300]}")
    best = min(results, key=results.get)
    set_experts_impl(model, best)
    log(f"experts backend: {best}")
    return best, {k: round(v * 1000, 1) for k, v in results.items()}


# ---------------------------------------------------------------- checkpoint


def hub_tensors(model, variant):
    """The model's weights under the hub checkpoint's names (one tensor per expert), float16.
    variant = (transposed, gate_first) says how transformers' fused experts tensor is laid out;
    the reload check decides which variant is right."""
    transposed, gate_first = variant
    out = {}
    tied = model.config.tie_word_embeddings
    for k, v in model.state_dict().items():
        if tied and k == "lm_head.weight":
            continue
        v = v.detach().to(torch.float16).cpu()
        m = re.fullmatch(r"(.*\.mlp\.experts)\.(gate_up_proj|down_proj)", k)
        if m:
            base, which = m.groups()
            for j in range(v.size(0)):
                w = v[j].t() if transposed else v[j]  # -> [out, in]
                if which == "gate_up_proj":
                    first, second = w.chunk(2, dim=0)
                    gate, up = (first, second) if gate_first else (second, first)
                    out[f"{base}.{j}.gate_proj.weight"] = gate.contiguous()
                    out[f"{base}.{j}.up_proj.weight"] = up.contiguous()
                else:
                    out[f"{base}.{j}.down_proj.weight"] = w.contiguous()
            continue
        out[k] = v.contiguous()
    return out


def fused_layout_variants(model):
    sd = model.state_dict()
    if not any(k.endswith("mlp.experts.gate_up_proj") for k in sd):
        return [(False, True)]  # per-expert modules already: names map one to one
    first = model.model.layers[0].mlp.experts
    t = bool(getattr(first, "experts_are_transposed", False))
    return [(t, True), (not t, True), (t, False), (not t, False)]


@torch.no_grad()
def save_checkpoint(model, tok, cfg_dict, out_dir, probe, device):
    """Writes config, tokenizer and float16 weights in hub layout, reloads them with
    transformers and checks the logits against the (float16-rounded) trained model."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(tok, cfg_dict["max_position_embeddings"]), f, indent=2)
    # The trained parameters themselves are rounded to float16 values, so that the model and
    # the file agree (parameters only: the RoPE frequencies buffer stays float32).
    for p in model.parameters():
        p.copy_(p.to(torch.float16).to(torch.float32))
    set_experts_impl(model, "eager")
    model.eval()
    ref = model(input_ids=probe, use_cache=False).logits.float()
    path = os.path.join(out_dir, "model.safetensors")
    for variant in fused_layout_variants(model):
        save_file(hub_tensors(model, variant), path, metadata={"format": "pt"})
        try:
            m2, info = AutoModelForCausalLM.from_pretrained(
                out_dir, output_loading_info=True, attn_implementation="sdpa", dtype=torch.float32
            )
            bad = {k: v for k, v in info.items() if v}
            m2 = m2.to(device=device, dtype=torch.float32).eval()
            set_experts_impl(m2, "eager")
            got = m2(input_ids=probe, use_cache=False).logits.float()
            diff = (got - ref).abs().max().item()
        except Exception as e:  # noqa: BLE001 - a wrong layout may fail to load at all
            log(f"checkpoint variant {variant}: reload failed: {type(e).__name__}: {str(e)[:300]}")
            continue
        log(f"checkpoint variant transposed={variant[0]} gate_first={variant[1]}: loading info {bad or 'clean'}, max |logit diff| {diff:.3g}")
        if not bad and diff < 1e-3:
            model.train()
            return m2, diff
    sys.exit("checkpoint: no layout variant reloads to the trained model's logits")


def split_file(path, part_bytes):
    h = hashlib.sha256()
    size = os.path.getsize(path)
    parts = []
    with open(path, "rb") as f:
        i = 0
        while True:
            b = f.read(part_bytes)
            if not b:
                break
            h.update(b)
            p = f"{path}.part-{i:02d}"
            with open(p, "wb") as g:
                g.write(b)
            parts.append(os.path.basename(p))
            i += 1
    os.remove(path)
    return {"bytes": size, "sha256": h.hexdigest(), "parts": parts}


# ---------------------------------------------------------------- evaluation


@torch.no_grad()
def text_ppl(model, tok, text, device, prefix=None):
    """Perplexity of one text in a single window: every token after the first is predicted
    from all tokens before it (float32). With prefix, that token id is put in front and the
    text's first token is predicted too."""
    ids = tok.encode(text, add_special_tokens=False).ids
    if prefix is not None:
        ids = [prefix] + ids
    x = torch.tensor([ids], device=device)
    logits = model(input_ids=x[:, :-1], use_cache=False).logits.float()
    nll = F.cross_entropy(logits[0], x[0, 1:], reduction="none")
    return {
        "text_tokens": len(ids) - (1 if prefix is not None else 0),
        "predicted": int(nll.numel()),
        "nll_sum": nll.sum().item(),
        "mean_nll": nll.mean().item(),
        "ppl": math.exp(nll.mean().item()),
        "first_token_nll": [round(v, 5) for v in nll[:16].tolist()],
    }


@torch.no_grad()
def greedy(model, tok, prompt, n, device, eot):
    ids = tok.encode(prompt, add_special_tokens=False).ids
    prompt_len = len(ids)
    for _ in range(n):
        logits = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0, -1]
        nxt = int(logits.float().argmax())
        ids.append(nxt)
        if nxt == eot:
            break
    return {"prompt": prompt, "prompt_ids": ids[:prompt_len], "ids": ids[prompt_len:], "text": tok.decode(ids[prompt_len:])}


@torch.no_grad()
def expert_usage(model, stream, ctx, device):
    """Fraction of top-k picks that go to each expert, per layer, over one window batch."""
    model.eval()
    full = [w for w in windows(stream, ctx) if w.numel() == ctx + 1][:8]
    if not full:
        return []
    chunk = torch.stack(full).to(device).long()
    out = model(input_ids=chunk[:, :-1], output_router_logits=True, use_cache=False)
    rl = getattr(out, "router_logits", None)
    usage = []
    if rl:
        k = model.config.num_experts_per_tok
        for r in rl:
            picks = r.float().topk(k, dim=-1).indices.reshape(-1)
            hist = torch.bincount(picks, minlength=r.size(-1)).float()
            usage.append([round(v, 3) for v in (hist / hist.sum()).tolist()])
    model.train()
    return usage


# ---------------------------------------------------------------- pipeline


def pipeline(a, tag, train_docs, valid_docs, heldout_text, out_dir, budget_s, tok_bytes, device):
    t = time.time()
    texts = [d[1] for d in train_docs]
    # Every k-th file, so that the tokenizer sees all of the tree, within tok_bytes.
    all_bytes = sum(len(s.encode("utf-8")) for s in texts)
    k = max(1, math.ceil(all_bytes / tok_bytes))
    sample = texts[::k]
    n = sum(len(s.encode("utf-8")) for s in sample)
    tok = train_tokenizer(sample, a.vocab)
    vocab = tok.get_vocab_size()
    eot = tok.token_to_id("<|endoftext|>")
    log(f"{tag} tokenizer: vocab {vocab}, trained on {len(sample)} files {n:,} bytes in {time.time() - t:.1f} s")
    t = time.time()
    train_stream = encode_stream(tok, texts, eot).to(device)
    val_texts = [d[1] for d in valid_docs]
    val_stream = encode_stream(tok, val_texts, eot)
    val_bytes = sum(len(s.encode("utf-8")) for s in val_texts)
    train_bytes = sum(len(s.encode("utf-8")) for s in texts)
    log(f"{tag} tokens: train {train_stream.numel():,} ({train_bytes / train_stream.numel():.2f} bytes/token), valid {val_stream.numel():,}; {time.time() - t:.1f} s")

    cfg = hub_config(a, vocab, eot)
    torch.manual_seed(a.seed)
    model = build_model(cfg, device)
    n_params = count_params(model)
    n_expert = sum(p.numel() for name, p in model.named_parameters() if ".experts." in name)
    log(f"{tag} model: {n_params:,} parameters ({n_expert:,} in experts), attention {model.config._attn_implementation}")
    if tag == "main" and not (10e6 <= n_params <= 40e6):
        sys.exit(f"model has {n_params:,} parameters, outside 10M..40M")

    impl, impl_ms = pick_experts_impl(model, train_stream, a, device)
    if tag == "main" and a.deadline_s > 0:
        left = a.deadline_s - (time.time() - T0) - a.reserve_s
        if left < budget_s:
            log(f"{tag}: training budget cut from {budget_s:.0f} s to {left:.0f} s to end by --deadline-s {a.deadline_s:.0f}")
            budget_s = max(10.0, left)
    tr = train(model, train_stream, a, budget_s, device, val_stream, tag)

    probe = val_stream[: min(256, val_stream.numel())][None].to(device).long()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    m2, diff = save_checkpoint(model, tok, cfg, os.path.join(out_dir, "ckpt"), probe, device)

    t = time.time()
    tot, cnt = eval_nll(m2, val_stream, a.ctx, device, bf16=False)
    val = {
        "tokens": cnt,
        "bytes": val_bytes,
        "loss": tot / cnt,
        "ppl": math.exp(tot / cnt),
        "bits_per_byte": tot / math.log(2) / val_bytes,
        "files": len(valid_docs),
    }
    log(f"{tag} VALID (held-out packages, float32, fp16 weights): loss {val['loss']:.4f} ppl {val['ppl']:.3f} over {cnt:,} tokens; {val['bits_per_byte']:.3f} bits/byte; {time.time() - t:.1f} s")
    ht = text_ppl(m2, tok, heldout_text, device)
    ht_eot = text_ppl(m2, tok, heldout_text, device, prefix=eot)
    log(f"{tag} HELDOUT TEXT: ppl {ht['ppl']:.4f} over {ht['predicted']} predicted tokens ({ht['text_tokens']} text tokens); with <|endoftext|> in front: {ht_eot['ppl']:.4f} over {ht_eot['predicted']}")
    prompts = [
        "func reverse(s string) string {",
        "package main\n\nimport \"fmt\"\n\nfunc main() {\n",
        "// Max returns the larger of x or y.\nfunc Max(x, y int) int {\n",
    ]
    samples = [greedy(m2, tok, p, 48, device, eot) for p in prompts]
    for s in samples:
        log(f"{tag} sample {s['prompt']!r} -> {s['text']!r}")
    usage = expert_usage(m2, val_stream, a.ctx, device)
    for i, u in enumerate(usage):
        log(f"{tag} expert use, layer {i}: {u}")

    weights = split_file(os.path.join(out_dir, "ckpt", "model.safetensors"), PART_BYTES)
    return {
        "config": cfg,
        "parameters": n_params,
        "expert_parameters": n_expert,
        "tokenizer": {"vocab": vocab, "trained_on_files": len(sample), "trained_on_bytes": n},
        "train_tokens_in_corpus": int(train_stream.numel()),
        "train_bytes_in_corpus": train_bytes,
        "experts_backend": impl,
        "experts_backend_ms": impl_ms,
        "train": tr,
        "epochs": round(tr["tokens"] / train_stream.numel(), 2),
        "reload_max_logit_diff": diff,
        "valid": val,
        "heldout_text": ht,
        "heldout_text_with_eot_prefix": ht_eot,
        "samples": samples,
        "expert_usage": usage,
        "weights": weights,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True, help="directory with train.jsonl.gz, valid.jsonl.gz, manifest.tsv")
    p.add_argument("--out", required=True)
    p.add_argument("--heldout-text", required=True)
    p.add_argument("--budget-s", type=float, default=300, help="main training wall time")
    p.add_argument("--smoke-s", type=float, default=20, help="smoke-test training wall time; 0 skips the smoke test")
    p.add_argument("--deadline-s", type=float, default=0, help="if > 0, shorten main training so the script ends by then")
    p.add_argument("--reserve-s", type=float, default=45, help="time kept after training for saving and evaluation")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--expert-ffn", type=int, default=128)
    p.add_argument("--rope-theta", type=float, default=1e6)
    p.add_argument("--ctx", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--aux-coef", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--tok-bytes", type=int, default=24_000_000, help="cap on the bytes the tokenizer is trained on")
    p.add_argument("--log-every-s", type=float, default=10)
    p.add_argument("--val-every-s", type=float, default=60)
    a = p.parse_args()

    import tokenizers
    import transformers

    device = torch.device("cuda")
    versions = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "gpu": torch.cuda.get_device_name(0),
    }
    log("versions", versions)
    log("args", vars(a))
    torch.backends.cuda.matmul.allow_tf32 = True
    train_docs = read_jsonl_gz(os.path.join(a.corpus, "train.jsonl.gz"))
    valid_docs = read_jsonl_gz(os.path.join(a.corpus, "valid.jsonl.gz"))
    with open(os.path.join(a.corpus, "manifest.tsv"), "rb") as f:
        manifest_sha = hashlib.sha256(f.read()).hexdigest()
    with open(a.heldout_text, encoding="utf-8") as f:
        heldout_text = f.read()
    log(f"corpus: {len(train_docs)} train files, {len(valid_docs)} valid files, manifest sha256 {manifest_sha}")

    if a.smoke_s > 0:
        smoke_dir = os.path.join(a.out, "smoke")
        small = train_docs[:: max(1, len(train_docs) // 400)]
        pipeline(a, "smoke", small, valid_docs[:10], heldout_text, smoke_dir, a.smoke_s, 3_000_000, device)
        shutil.rmtree(smoke_dir)
        log("smoke test passed")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.set_float32_matmul_precision("high")

    res = pipeline(a, "main", train_docs, valid_docs, heldout_text, a.out, a.budget_s, a.tok_bytes, device)
    res["versions"] = versions
    res["args"] = vars(a)
    res["corpus_manifest_sha256"] = manifest_sha
    res["total_wall_s"] = round(time.time() - T0, 1)
    with open(os.path.join(a.out, "metrics.json"), "w") as f:
        json.dump(res, f, indent=1)
    log("done; metrics in", os.path.join(a.out, "metrics.json"))


if __name__ == "__main__":
    main()

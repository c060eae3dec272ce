#!/usr/bin/env python3
"""The PyTorch peers of the GPU prefill and capture benchmarks (issue 32), run on a lent GPU machine with the image's
own torch and transformers: the bf16 model directory written by make_big_model --bf16 (config.json +
model.safetensors) loaded into transformers' LlamaForCausalLM on the GPU, then
  sdpa:  attn_implementation="sdpa", no capture, logits of the last position only: tokens/s at each T;
  eager: attn_implementation="eager" with output_attentions=True (every layer's probabilities on the device), one
         layer's rows copied to the host (what focalscope's capture stores): tokens/s at each T, or where it runs
         out of device memory.
Medians of REPS runs after one warm-up, CUDA-synchronised wall clock. Lines "result KEY VALUE" feed the JSON.
usage: torch_llama.py MODEL_DIR [--sdpa T,T] [--eager T,T] [--reps N]"""
import argparse
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--sdpa", default="2048,8192")
    ap.add_argument("--eager", default="2048,8192")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    import torch
    import transformers
    from transformers import LlamaForCausalLM

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name(0)}")
    t0 = time.time()
    model = LlamaForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, attn_implementation="sdpa",
                                             device_map="cuda")
    model.eval()
    print(f"loaded {args.model} in {time.time() - t0:.1f} s, {torch.cuda.memory_allocated() / 2**30:.1f} GiB")
    vocab = model.config.vocab_size

    def timed(T, impl, capture):
        if hasattr(model, "set_attn_implementation"):  # transformers >= 4.56
            model.set_attn_implementation(impl)
        else:
            model.config._attn_implementation = impl
        g = torch.Generator(device="cpu").manual_seed(T)
        ids = torch.randint(0, vocab, (1, T), generator=g).cuda()
        times = []
        for r in range(args.reps + 1):
            torch.cuda.synchronize()
            t = time.time()
            with torch.no_grad():
                out = model(input_ids=ids, use_cache=False, logits_to_keep=1, output_attentions=capture)
                if capture:
                    rows = out.attentions[len(out.attentions) // 2].float().cpu()  # one layer's rows to the host
                    del rows
            torch.cuda.synchronize()
            if r > 0:
                times.append(time.time() - t)
            del out
        return T / statistics.median(times)

    for T in [int(x) for x in args.sdpa.split(",") if x]:
        try:
            tps = timed(T, "sdpa", False)
            print(f"sdpa T={T}: {tps:.0f} tokens/s")
            print(f"result torch_sdpa_T{T} {tps:.1f}")
        except torch.OutOfMemoryError:
            print(f"sdpa T={T}: out of device memory")
        torch.cuda.empty_cache()
        sys.stdout.flush()
    for T in [int(x) for x in args.eager.split(",") if x]:
        try:
            tps = timed(T, "eager", True)
            print(f"eager + output_attentions T={T}: {tps:.0f} tokens/s, peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
            print(f"result torch_eager_capture_T{T} {tps:.1f}")
        except torch.OutOfMemoryError:
            print(f"eager + output_attentions T={T}: out of device memory "
                  f"({torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB card)")
            print(f"result torch_eager_capture_T{T} oom")
        torch.cuda.empty_cache()
        sys.stdout.flush()


if __name__ == "__main__":
    main()

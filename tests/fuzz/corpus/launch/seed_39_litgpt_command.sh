CUDA_VISIBLE_DEVICES=0,1 litgpt finetune_lora checkpoints/meta-llama/Llama-3.2-3B --devices 2 \
  --precision bf16-true --train.micro_batch_size=2 --train.global_batch_size 16 \
  --optimizer.class_path bitsandbytes.optim.PagedAdamW8bit --optimizer.init_args.lr 2e-4 --lora_mlp true
python -m litgpt finetune_full a/b --config cfg.yaml --devices auto

"""What everything in `evals/` shares: the results schema and its checks (`results`,
`result_check`), run directories with resume (`run_dir`), a validation's finished jobs kept
for `--resume` and the code digest they are kept under (`job_store`), confidence intervals
(`stats`), input checks and error reporting (`edge`), the terminal (`console`), the options
several commands share (`options`), a validity check's record (`checks`), API keys and the
secret scrubber (`secrets`), durable writes (`durable`), processes and signals (`processes`),
the HTTP layer under the hosted-model clients (`hosted_client`) and raw HTTP for probing
(`raw_http`). The keyless servers are `evals.servers`."""

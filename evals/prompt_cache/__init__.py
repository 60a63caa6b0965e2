"""Provider prompt caching for hosted-model evals (the tier design): the stability-tier manager, the
request layout with `cache_control` breakpoints, and the offline cache replay."""

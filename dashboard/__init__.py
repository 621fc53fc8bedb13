"""What team leads read: the overview and a use case's page, the answer explorer and its exports,
the estimates API and /metrics; the statistics behind them (`domain/`), the experts' scale,
causes, threshold tuner and charts; the action alarm."""

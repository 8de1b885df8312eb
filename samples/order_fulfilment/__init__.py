"""The order-fulfilment sample: payment with a deadline, stock, shipping, and a compensation."""

from samples.order_fulfilment.workflow import workflow

__all__ = ["workflow"]

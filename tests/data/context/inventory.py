"""Inventory service: tracks stock levels per warehouse."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable

LOG = logging.getLogger(__name__)
DEFAULT_WAREHOUSE = "main"


@dataclass
class Item:
    sku: str
    name: str
    quantity: int = 0
    tags: list[str] = field(default_factory=list)

    def restock(self, amount: int) -> None:
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.quantity += amount


def parse_line(line: str) -> Item:
    sku, name, quantity = line.split(",")
    return Item(sku=sku.strip(), name=name.strip(), quantity=int(quantity))


class Inventory:
    def __init__(self, warehouse: str = DEFAULT_WAREHOUSE) -> None:
        self.warehouse = warehouse
        self.items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        LOG.debug("adding %s", item.sku)
        self.items[item.sku] = item

    def load(self, lines: Iterable[str]) -> int:
        count = 0
        for line in lines:
            self.add(parse_line(line))
            count += 1
        return count

    def total_quantity(self) -> int:
        total = 0
        for item in self.items.values():
            # cursor here
            total += item.quantity
        return total

    def low_stock(self, threshold: int = 5) -> list[Item]:
        return [item for item in self.items.values() if item.quantity < threshold]


def summarize(inventory: Inventory) -> str:
    lines = [f"{item.sku}: {item.quantity}" for item in inventory.items.values()]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(Inventory()))

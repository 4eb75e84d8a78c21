"""A small inventory module: the file `lsp-complete demo` types into."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0
    tags: list[str] = field(default_factory=list)

    def total_value(self) -> float:
        return self.price * self.quantity


class Inventory:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        if item.name in self.items:
            self.items[item.name].quantity += item.quantity
        else:
            self.items[item.name] = item

    def remove(self, name: str, quantity: int = 1) -> None:
        item = self.items[name]
        item.quantity -= quantity
        if item.quantity <= 0:
            del self.items[name]

    def total_value(self) -> float:
        return sum(item.total_value() for item in self.items.values())

    def find_by_tag(self, tag: str) -> list[Item]:
        return [item for item in self.items.values() if tag in item.tags]

    def cheapest(self) -> Item | None:
        if not self.items:
            return None
        return min(self.items.values(), key=lambda item: item.price)

    def save_json(self, path: Path) -> None:
        data = [item.__dict__ for item in self.items.values()]
        path.write_text(json.dumps(data, indent=2))

    def load_csv(self, path: Path) -> None:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                self.add(Item(row["name"], float(row["price"]), int(row["quantity"])))


def main() -> None:
    inventory = Inventory()
    inventory.add(Item("apple", 0.5, 10, ["fruit"]))
    inventory.add(Item("pear", 0.75, 4, ["fruit"]))
    inventory.add(Item("hammer", 12.0, 1, ["tools"]))
    print(f"total value: {inventory.total_value():.2f}")
    for item in inventory.find_by_tag("fruit"):
        print(item.name, item.quantity)


if __name__ == "__main__":
    main()

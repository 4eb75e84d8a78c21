package com.example.orders;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

public class OrderService {
    private final List<Order> orders = new ArrayList<>();
    private int nextId = 1;

    public OrderService() {
        this.nextId = 1;
    }

    public Order create(String customer, double amount) {
        Order order = new Order(nextId++, customer, amount);
        orders.add(order);
        return order;
    }

    public Optional<Order> find(int id) {
        return orders.stream().filter(o -> o.id() == id).findFirst();
    }

    public double totalFor(String customer) {
        double total = 0;
        for (Order order : orders) {
            if (order.customer().equals(customer)) {
                // cursor here
                total += order.amount();
            }
        }
        return total;
    }

    public List<Order> largeOrders(double threshold) {
        List<Order> result = new ArrayList<>();
        for (Order order : orders) {
            if (order.amount() > threshold) {
                result.add(order);
            }
        }
        return result;
    }

    @Override
    public String toString() {
        return "OrderService(" + orders.size() + " orders)";
    }

    public record Order(int id, String customer, double amount) {}
}

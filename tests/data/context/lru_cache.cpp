#include <list>
#include <optional>
#include <unordered_map>

using namespace std;

namespace cache {

template <typename K, typename V>
class LruCache {
public:
    explicit LruCache(size_t capacity) : capacity_(capacity) {}

    optional<V> get(const K& key) {
        auto it = index_.find(key);
        if (it == index_.end()) {
            return nullopt;
        }
        items_.splice(items_.begin(), items_, it->second);
        return it->second->second;
    }

    void put(const K& key, V value) {
        auto it = index_.find(key);
        if (it != index_.end()) {
            it->second->second = std::move(value);
            items_.splice(items_.begin(), items_, it->second);
            return;
        }
        if (items_.size() == capacity_) {
            // cursor here
            index_.erase(items_.back().first);
            items_.pop_back();
        }
        items_.emplace_front(key, std::move(value));
        index_[key] = items_.begin();
    }

    size_t size() const { return items_.size(); }

private:
    size_t capacity_;
    list<pair<K, V>> items_;
    unordered_map<K, typename list<pair<K, V>>::iterator> index_;
};

int hit_rate_percent(int hits, int misses) {
    int total = hits + misses;
    return total == 0 ? 0 : hits * 100 / total;
}

}  // namespace cache

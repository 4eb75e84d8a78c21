package server

import (
	"encoding/json"
	"net/http"
	"sync"
)

// Store keeps notes in memory.
type Store struct {
	mu    sync.Mutex
	notes map[string]string
}

func NewStore() *Store {
	return &Store{notes: make(map[string]string)}
}

func (s *Store) Get(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	note, ok := s.notes[id]
	return note, ok
}

func (s *Store) Put(id, note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes[id] = note
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	switch r.Method {
	case http.MethodGet:
		note, ok := s.Get(id)
		if !ok {
			// cursor here
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": id, "note": note})
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func ListenAndServe(addr string) error {
	return http.ListenAndServe(addr, NewStore())
}

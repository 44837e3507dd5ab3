package admin

import (
	"context"

	"net/http"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// formatTime writes t as the admin API does: the protocol's ISO time.
func formatTime(t time.Time) string { return protocol.FormatTime(t) }

// Op is the operator service acting for r: its audit rows name r's
// method and route pattern, with status (0: each action's own).
func (s *Server) Op(r *http.Request, status int) *operator.Service {
	_, route, _ := strings.Cut(r.Pattern, " ")
	return s.op.Via(operator.Origin{Method: r.Method, Route: route, Status: status})
}

// Operator is the operator service the Server is an adapter over.
func (s *Server) Operator() *operator.Service { return s.op }

// BoxName reads and checks the {name} path value.
func BoxName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	return name, operator.CheckBoxName(name)
}

// Drop tells the cache, when there is one, what a write touched.
func (s *Server) Drop(kind, key string) { s.op.Drop(kind, key) }

// Changed tells the cache what a write touched and waits until it is in
// force on every replica (operator.Service.Changed).
func (s *Server) Changed(ctx context.Context, kind, key string) error {
	return s.op.Changed(ctx, kind, key)
}

// Declaration reads a box's last kept report: nil when it never reported.
func (s *Server) Declaration(ctx context.Context, box string) (*protocol.Declaration, error) {
	return s.op.Declaration(ctx, box)
}

// published reports whether v's last report listed it as published.
func published(v operator.BoxView) bool { return v.Listing != nil && v.Listing.Published }

// Box reads the box named in r's {name} path value, or refuses with a
// 400 (not a box name) or a 404 (no such box).
func (s *Server) Box(r *http.Request) (store.Box, error) {
	name, err := BoxName(r)
	if err != nil {
		return store.Box{}, err
	}
	b, err := s.cfg.Store.Box(r.Context(), name)
	return b, operator.StoreError(err, operator.NoBox(name), "")
}

func (s *Server) getBox(w http.ResponseWriter, r *http.Request) error {
	v, err := s.op.Box(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) addBox(w http.ResponseWriter, r *http.Request) error {
	var nb operator.NewBox
	if err := readJSON(w, r, &nb); err != nil {
		return err
	}
	bt, err := s.Op(r, 0).AddBox(r.Context(), nb)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, bt)
}

func (s *Server) updateBox(w http.ResponseWriter, r *http.Request) error {
	var set operator.BoxSettings
	if _, err := s.Box(r); err != nil {
		return err
	}
	if err := readJSON(w, r, &set); err != nil {
		return err
	}
	v, err := s.Op(r, 0).UpdateBox(r.Context(), r.PathValue("name"), set)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) removeBox(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).RemoveBox(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rotateBox(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.Box(r); err != nil {
		return err
	}
	var tr operator.TokenRotation
	if r.ContentLength > 0 {
		if err := readJSON(w, r, &tr); err != nil {
			return err
		}
	}
	bt, err := s.Op(r, 0).RotateBoxWith(r.Context(), r.PathValue("name"), tr)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, bt)
}

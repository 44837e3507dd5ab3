package operator

import (
	"context"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/store"
)

// ResourceView is a Fountain id assigned to a box.
type ResourceView struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	At   string `json:"at"`
}

// ResourceList answers GET /api/boxes/{name}/resources.
type ResourceList struct {
	Resources []ResourceView `json:"resources"`
}

// NewResource is the body of POST /api/boxes/{name}/resources.
type NewResource struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// resourceID reports whether id can be a Fountain id: 1 to 200 printable
// ASCII characters with no space or slash.
func resourceID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= 0x20 || id[i] >= 0x7f || id[i] == '/' {
			return false
		}
	}
	return true
}

// checkResource refuses a kind that is no Fountain kind or an id that
// could not be one.
func checkResource(kind, id string) error {
	switch kind {
	case store.ResourceConversation, store.ResourceSandbox, store.ResourceVault:
		if resourceID(id) {
			return nil
		}
	}
	return Errorf(Invalid, "A Fountain resource is a kind (conversation, sandbox or vault) and an id of 1 to 200 printable characters with no space or slash.")
}

// ListResources returns the Fountain ids assigned to box. NotFound for no
// such box.
func (s *Service) ListResources(ctx context.Context, box string) ([]ResourceView, error) {
	if _, err := s.StoredBox(ctx, box); err != nil {
		return nil, err
	}
	list, err := s.cfg.Store.ListResources(ctx, box)
	return storeViews(list, err, func(res store.Resource) ResourceView {
		return ResourceView{Kind: res.Kind, ID: res.ID, At: formatTime(res.At)}
	})
}

// AddResource assigns the Fountain id nr names to box. Invalid for a bad
// kind or id, NotFound for no such box, Conflict when it is another box's.
func (s *Service) AddResource(ctx context.Context, box string, nr NewResource) (ResourceView, error) {
	if err := CheckBoxName(box); err != nil {
		return ResourceView{}, err
	}
	if err := checkResource(nr.Kind, nr.ID); err != nil {
		return ResourceView{}, err
	}
	res := store.Resource{Box: box, Kind: nr.Kind, ID: nr.ID, At: s.cfg.Now().UTC()}
	if err := s.cfg.Store.AddResource(ctx, res); err != nil {
		exists := fmt.Sprintf("Fountain %s %s is another box's.", nr.Kind, nr.ID)
		if owner, oerr := s.cfg.Store.ResourceOwner(ctx, nr.Kind, nr.ID); oerr == nil {
			exists = fmt.Sprintf("Fountain %s %s is another box's (box %s's); unassign it there first.", nr.Kind, nr.ID, owner)
		}
		return ResourceView{}, StoreError(err, NoBox(box), exists)
	}
	if err := s.wrote(ctx, store.ChangeResource, nr.Kind+"/"+nr.ID, box, http.StatusCreated, "assigned Fountain "+nr.Kind+" "+nr.ID+" to the box"); err != nil {
		return ResourceView{}, err
	}
	return ResourceView{Kind: res.Kind, ID: res.ID, At: formatTime(res.At)}, nil
}

// RemoveResource unassigns box's Fountain id; the box's requests naming
// it are refused from then on. NotFound when it is not box's.
func (s *Service) RemoveResource(ctx context.Context, box, kind, id string) error {
	if err := CheckBoxName(box); err != nil {
		return err
	}
	if err := checkResource(kind, id); err != nil {
		return err
	}
	owner, err := s.cfg.Store.ResourceOwner(ctx, kind, id)
	if err == nil && owner != box {
		err = store.ErrNotFound // another box's is not this box's to remove
	}
	if err == nil {
		err = s.cfg.Store.DeleteResource(ctx, kind, id)
	}
	if err != nil {
		return StoreError(err, fmt.Sprintf("Box %s has no Fountain %s %s.", box, kind, id), "")
	}
	return s.wrote(ctx, store.ChangeResource, kind+"/"+id, box, http.StatusNoContent, "unassigned Fountain "+kind+" "+id+" from the box")
}

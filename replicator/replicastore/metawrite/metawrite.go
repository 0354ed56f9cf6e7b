// Package metawrite creates and replaces whole objects of built-in kinds (and, sent as
// JSON, unstructured objects of kinds known only at run time) and returns only their
// metadata, read back from the API server's answer in whichever form costs
// least for the object's size; it also deletes them, reading no more of the answer
// than client-go must.
//
// The API server answers a create or an update with the whole object it wrote. A
// writer of replicas has no use for their content, and for large objects reading it
// back is not free: in a fan-out of 900 KiB ConfigMaps into 1,000 namespaces,
// receiving and decoding those answers was over a third of cmsync's CPU (make
// bench-sweep -profile). Asked with as=PartialObjectMetadata in the Accept header, the
// API server answers with the object's metadata alone, as client-go's metadata client
// asks for reads and patches. That costs the API server more than the whole answer,
// though, while the writer saves its decoding only for large objects (the figures are
// at replicator's metadataAnswersFrom). So a Client asks for metadata-only answers
// from a size up (New's metadataFrom), and below it takes the whole answer and keeps
// its metadata. The metadata client has no create or update, so these two are written
// here, on client-go's REST client.
package metawrite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// metadataOnly asks for PartialObjectMetadata, in protobuf or JSON; plain JSON last,
// the form in which the API server writes the Status of a refused write. wholeObject
// asks for the object as written.
const (
	metadataOnly = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
		"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	wholeObject = "application/vnd.kubernetes.protobuf,application/json"
)

// scheme knows the objects written (client-go's built-in kinds, sent in protobuf)
// and the answers: PartialObjectMetadata, or the Status of a refused write.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(metav1.AddMetaToScheme(scheme))
}

// Client writes objects of built-in kinds and returns the metadata the API server
// answers with, and deletes them. It is safe for concurrent use.
type Client struct {
	rest         *rest.RESTClient
	mapper       meta.RESTMapper
	metadataFrom int
	// resources keeps each kind's resource once the mapper has named it
	// (schema.GroupVersionKind to resource): asking the mapper on every write was a
	// tenth of the CPU of cmsync's writers in a fan-out (make bench-sweep, perf), and
	// the kinds written here are built in, so their resources never change.
	resources sync.Map
}

// resource is where a kind's objects are: the resource's plural name, and whether it
// is namespaced.
type resource struct {
	plural     string
	namespaced bool
}

// New returns a Client that sends its requests as cfg says (server, credentials,
// rate limit) through httpClient, which it can share with other clients, and finds
// each kind's resource with mapper. It asks for metadata-only answers for objects of
// metadataFrom bytes or more (in protobuf), and for whole answers below.
func New(cfg *rest.Config, httpClient *http.Client, mapper meta.RESTMapper, metadataFrom int) (*Client, error) {
	config := rest.CopyConfig(cfg)
	config.ContentType = runtime.ContentTypeProtobuf
	config.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	// Every request names its whole path (AbsPath) and the version of its options
	// (SpecificallyVersionedParams).
	config.GroupVersion = &schema.GroupVersion{}
	config.APIPath = "/"
	restClient, err := rest.RESTClientForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the metadata-answer client: %w", err)
	}
	return &Client{rest: restClient, mapper: mapper, metadataFrom: metadataFrom}, nil
}

// Create creates obj and returns its metadata as the API server stored it. obj is
// left as it was sent.
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) (*metav1.PartialObjectMetadata, error) {
	o := (&client.CreateOptions{}).ApplyOptions(opts).AsCreateOptions()
	return c.write(ctx, http.MethodPost, obj, false, options{o.DryRun, o.FieldManager, o.FieldValidation})
}

// Update replaces obj (conditional on its resourceVersion, when set) and returns its
// metadata as the API server stored it. obj is left as it was sent.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) (*metav1.PartialObjectMetadata, error) {
	o := (&client.UpdateOptions{}).ApplyOptions(opts).AsUpdateOptions()
	return c.write(ctx, http.MethodPut, obj, true, options{o.DryRun, o.FieldManager, o.FieldValidation})
}

// Delete deletes obj, whose kind and place its metadata name, as opts say
// (preconditions, propagation). Its answer (a Status, for ConfigMaps and Secrets) is
// read in protobuf, only as far as client-go reads every answer to tell a failure:
// controller-runtime's client (v0.25) decodes it and converts it to an unstructured
// object through JSON, which was a fifth of the CPU of cmsync's deletes in the
// cleanups of N = 100 (make bench-sweep, perf).
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return err
	}
	segments, err := c.pathOf(gvk, obj, true)
	if err != nil {
		return err
	}
	return c.rest.Delete().AbsPath(segments...).
		Body((&client.DeleteOptions{}).ApplyOptions(opts).AsDeleteOptions()).
		SetHeader("Accept", wholeObject).Do(ctx).Error()
}

// options are the fields metav1.CreateOptions and metav1.UpdateOptions share, all a
// write of theirs can carry.
type options struct {
	dryRun          []string
	fieldManager    string
	fieldValidation string
}

// setOn sets the options on a request as query parameters, named and omitted when
// empty as the API's parameter codec does. Written out here because the codec converts
// the options' struct by reflection on every write, a twentieth of the CPU of cmsync's
// writers in a fan-out (make bench-sweep, perf); TestOptionsAreTheCodecsParameters
// holds the two to the same query.
func (o options) setOn(r *rest.Request) *rest.Request {
	for _, d := range o.dryRun {
		r.Param("dryRun", d)
	}
	if o.fieldManager != "" {
		r.Param("fieldManager", o.fieldManager)
	}
	if o.fieldValidation != "" {
		r.Param("fieldValidation", o.fieldValidation)
	}
	return r
}

// write sends obj whole with verb to its collection, or to itself when named, and
// returns the metadata of the object the API server answers with.
func (c *Client) write(ctx context.Context, verb string, obj client.Object, named bool, opts options) (*metav1.PartialObjectMetadata, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	segments, err := c.pathOf(gvk, obj, named)
	if err != nil {
		return nil, err
	}
	request := opts.setOn(c.rest.Verb(verb).AbsPath(segments...))
	if u, ok := obj.(runtime.Unstructured); ok {
		// A kind known only at run time (an ObjectSync's) has no protobuf form: it is
		// sent as JSON, and answered with its metadata (answersWithMetadata).
		raw, err := json.Marshal(u.UnstructuredContent())
		if err != nil {
			return nil, err
		}
		request = request.Body(raw).SetHeader("Content-Type", runtime.ContentTypeJSON)
	} else {
		request = request.Body(obj)
	}
	if c.answersWithMetadata(obj) {
		written := &metav1.PartialObjectMetadata{}
		if err := request.SetHeader("Accept", metadataOnly).Do(ctx).Into(written); err != nil {
			return nil, err
		}
		return written, nil
	}
	whole, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := request.SetHeader("Accept", wholeObject).Do(ctx).Into(whole); err != nil {
		return nil, err
	}
	written, err := meta.Accessor(whole)
	if err != nil {
		return nil, err
	}
	return meta.AsPartialObjectMetadata(written), nil
}

// answersWithMetadata says whether obj is large enough for a metadata-only answer:
// its protobuf size, which every built-in kind knows, against metadataFrom. An object
// without one (unstructured) is always answered with its metadata: the scheme cannot
// decode it whole.
func (c *Client) answersWithMetadata(obj client.Object) bool {
	sized, ok := obj.(interface{ Size() int })
	return !ok || sized.Size() >= c.metadataFrom
}

// pathOf is the API path of the collection of obj, of kind gvk, or of obj itself when
// named.
func (c *Client) pathOf(gvk schema.GroupVersionKind, obj client.Object, named bool) ([]string, error) {
	res, err := c.resourceOf(gvk)
	if err != nil {
		return nil, err
	}
	segments := []string{"/apis", gvk.Group, gvk.Version}
	if gvk.Group == "" {
		segments = []string{"/api", gvk.Version}
	}
	if res.namespaced {
		segments = append(segments, "namespaces", obj.GetNamespace())
	}
	segments = append(segments, res.plural)
	if named {
		segments = append(segments, obj.GetName())
	}
	return segments, nil
}

// resourceOf is the resource of kind gvk, from the mapper the first time.
func (c *Client) resourceOf(gvk schema.GroupVersionKind) (resource, error) {
	if known, ok := c.resources.Load(gvk); ok {
		return known.(resource), nil
	}
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return resource{}, err
	}
	res := resource{plural: mapping.Resource.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
	c.resources.Store(gvk, res)
	return res, nil
}

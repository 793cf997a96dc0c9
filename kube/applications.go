package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/kukie/kukie-gitops/argocd"
)

// ApplicationResource is Argo CD's Application type.
var ApplicationResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

var applicationKind = schema.GroupKind{Group: "argoproj.io", Kind: "Application"}

// listPageSize bounds one page of the Application list; most clusters fit in one.
const listPageSize = 500

var appsKey = readKey{read: "list applications"}

// appSnapshot is one read of all Applications, indexed once and shared read-only.
type appSnapshot struct {
	index *argocd.AppIndex
}

// ListApplications returns the Applications of all namespaces (apps in any
// namespace included). The Applications share memory with the cache: read them, do
// not modify them. A cluster without Argo CD's Application type answers with an
// *Error of class argocd.FailureNotInstalled.
func (c *Cluster) ListApplications(ctx context.Context, mode ReadMode) ([]argocd.Application, error) {
	snap, err := c.applications(ctx, mode)
	if err != nil {
		return nil, err
	}
	return append([]argocd.Application(nil), snap.index.Applications()...), nil
}

func (c *Cluster) applications(ctx context.Context, mode ReadMode) (*appSnapshot, error) {
	// While an informer on Applications runs, it is at least as fresh as any read
	// mode asks for, and costs no request.
	if snap, ok := c.watchedApplications(); ok {
		_ = c.observeRead("applications", nil)
		return snap, nil
	}
	v, err := c.cached(ctx, c.reads, appsKey, mode, appsKey.read, func(ctx context.Context) (any, error) {
		return c.listApplications(ctx)
	})
	if err != nil {
		return nil, c.observeRead("applications", notInstalledIfNotFound(err))
	}
	_ = c.observeRead("applications", nil)
	return v.(*appSnapshot), nil
}

func (c *Cluster) listApplications(ctx context.Context) (*appSnapshot, error) {
	var apps []argocd.Application
	continueToken := ""
	for {
		req := c.apps.Get().Resource(ApplicationResource.Resource).Param("limit", strconv.Itoa(listPageSize))
		if continueToken != "" {
			req = req.Param("continue", continueToken)
		}
		data, err := req.Do(ctx).Raw()
		if err != nil {
			return nil, err
		}
		page, next, invalid, err := argocd.DecodeApplicationList(data)
		if err != nil {
			return nil, err
		}
		for _, err := range invalid {
			// The CRD's schema makes this rare; one unreadable Application must not
			// hide the others.
			zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", c.name).Msg("Skipping unreadable Application")
		}
		apps = append(apps, page...)
		if next == "" {
			return &appSnapshot{index: argocd.NewAppIndex(apps)}, nil
		}
		continueToken = next
	}
}

// applicationsClient is a REST client for argoproj.io/v1alpha1 that returns JSON.
func applicationsClient(cfg *rest.Config, httpClient *http.Client) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &schema.GroupVersion{Group: ApplicationResource.Group, Version: ApplicationResource.Version}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	return rest.RESTClientForConfigAndClient(cfg, httpClient)
}

// notInstalledIfNotFound turns a 404 for the Application collection into
// not_installed: the cluster does not serve the type at all.
func notInstalledIfNotFound(err error) error {
	var ke *Error
	if errors.As(err, &ke) && ke.Class == argocd.FailureNotFound {
		return &Error{Class: argocd.FailureNotInstalled, Op: ke.Op, Err: ke.Err}
	}
	return err
}

// GetApplication reads one Application. An Application that does not exist, or whose
// namespace is gone, is an *Error of class argocd.FailureNotFound (a 404 for people,
// not a 502); a cluster without the Application type gives argocd.FailureNotInstalled.
func (c *Cluster) GetApplication(ctx context.Context, namespace, name string, mode ReadMode) (argocd.Application, error) {
	op := fmt.Sprintf("get application %s/%s", namespace, name)
	v, err := c.cached(ctx, c.reads, objectKey(ApplicationResource, namespace, name), mode, op, func(ctx context.Context) (any, error) {
		data, err := c.apps.Get().Namespace(namespace).Resource(ApplicationResource.Resource).Name(name).Do(ctx).Raw()
		if err != nil {
			return nil, err
		}
		return argocd.DecodeApplication(data)
	})
	if err != nil {
		if apierrors.IsNotFound(err) && !c.servesApplications(ctx) {
			return argocd.Application{}, c.observeRead("application", notInstalledIfNotFound(err))
		}
		return argocd.Application{}, c.observeRead("application", err)
	}
	_ = c.observeRead("application", nil)
	return v.(argocd.Application), nil
}

// servesApplications reports whether the cluster serves Argo CD Applications. A 404
// for one Application does not say whether the object or the whole type is missing.
func (c *Cluster) servesApplications(ctx context.Context) bool {
	_, err := c.mapKind(ctx, applicationKind, ApplicationResource.Version)
	return err == nil
}

// AppList reads all Applications and summarises them for people.
func (c *Cluster) AppList(ctx context.Context, mode ReadMode) (argocd.AppList, error) {
	snap, err := c.applications(ctx, mode)
	if err != nil {
		return argocd.AppList{}, err
	}
	return argocd.SummarizeApps(snap.index.Applications()), nil
}

// AppDetail reads one Application and describes it for people.
func (c *Cluster) AppDetail(ctx context.Context, namespace, name string, mode ReadMode) (argocd.AppDetail, error) {
	app, err := c.GetApplication(ctx, namespace, name, mode)
	if err != nil {
		return argocd.AppDetail{}, err
	}
	return argocd.DescribeApp(app), nil
}

package resolve

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// Push gives fn what it takes to read and write ref's repository at
// ref's own registry: go-containerregistry remote options for
// remote.Get, remote.Write and the like, over the Resolver's HTTP layer
// (its CA files, insecure hosts, retries, request timeout, address
// checks and User-Agent), with the credentials of its keychain and a
// token for push and pull where the registry asks for one. fn must make
// its requests with the context it is given. Mirrors are never asked: a
// push goes to the registry ref names.
//
// A failure, fn's or the handshake's, is one line that names ref, the
// request that failed and the registry's answer (or the network cause),
// how often it was tried, and, for a refusal, whether credentials were
// sent and where they came from; credentials are masked. errors.As finds
// the registry's *transport.Error.
func (r *Resolver) Push(ctx context.Context, ref name.Reference, fn func(ctx context.Context, opts ...remote.Option) error) error {
	c := candidate{ref: r.withScheme(ref)}
	c.sess = r.session(c.ref.Context().Registry)
	tr := &regtransport.Trace{}
	ctx = regtransport.WithTrace(regtransport.WithRegistry(ctx, c.ref.Context().RegistryStr()), tr)
	err := r.pushAt(ctx, c, fn)
	if err == nil {
		return nil
	}
	return newError(ctx, ref, []tryFailure{{c: c, err: err, tr: tr}}, r.red)
}

// pushAt sets up the registry's transport for a push and runs fn.
func (r *Resolver) pushAt(ctx context.Context, c candidate, fn func(ctx context.Context, opts ...remote.Option) error) error {
	auth, _, err := c.sess.credentials(ctx)
	if err != nil {
		return err
	}
	repo := c.ref.Context()
	t, err := transport.NewWithContext(ctx, repo.Registry, auth, c.sess.base, []string{repo.Scope(transport.PushScope)})
	if err != nil {
		return err
	}
	// t is a *transport.Wrapper: go-containerregistry adds neither its
	// retries nor its User-Agent under it. Its retries of a whole upload
	// are off too, so that attempts are the HTTP layer's alone, as for
	// a resolution.
	return fn(ctx, remote.WithTransport(t), remote.WithRetryPredicate(func(error) bool { return false }))
}

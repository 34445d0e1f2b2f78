"""Secured API keys made by Algolia's Python client 4.x
(`SearchClientSync.generate_secured_api_key`) and used by its Insights and
Personalization clients against affinity serve: a key restricted to one
userToken and one index sends that user's events and reads that user's
profile, and is refused (403) for another user or index; an expired key
and a tampered one are refused. Prints what each call answered as one JSON
line.

Usage: python secured_keys.py HOST PORT APP PARENT_KEY
"""

import base64
import json
import sys
import time

from algoliasearch.http.exceptions import RequestException
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.insights.client import InsightsClientSync
from algoliasearch.insights.config import InsightsConfig
from algoliasearch.personalization.client import PersonalizationClientSync
from algoliasearch.personalization.config import PersonalizationConfig
from algoliasearch.search.client import SearchClientSync

host, port, app, parent = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def at_server(config):
    config.hosts = HostsCollection([Host(url=host, scheme="http", port=port)])
    return config


def clients(key):
    insights = InsightsClientSync.create_with_config(at_server(InsightsConfig(app, key)))
    personalization = PersonalizationClientSync.create_with_config(
        at_server(PersonalizationConfig(app, key, "us"))
    )
    return insights, personalization


def outcome(call):
    """The answer of `call` as a dict, or its refusal's status and message."""
    try:
        return call().to_dict()
    except RequestException as e:
        return {"status": e.status_code, "message": str(e)}


def click(user, index="products"):
    return {
        "eventType": "click",
        "eventName": "Product Clicked",
        "index": index,
        "userToken": user,
        "filters": ["brand:Apple"],
    }


# The generator is a method of the search client; it makes no request.
search = SearchClientSync(app, parent)
now = int(time.time())
key = search.generate_secured_api_key(
    parent,
    {
        "userToken": "py-alice",
        "validUntil": now + 3600,
        "restrictIndices": ["products"],
        "filters": "brand:Apple",
    },
)
expired = search.generate_secured_api_key(parent, {"validUntil": now - 60})
decoded = base64.b64decode(key).decode()
tampered = base64.b64encode(
    decoded.replace("userToken=py-alice", "userToken=py-bobby").encode()
).decode()

insights, personalization = clients(key)
out = {"key": key}
out["own_events"] = outcome(lambda: insights.push_events({"events": [click("py-alice")]}))
out["other_user_events"] = outcome(
    lambda: insights.push_events({"events": [click("py-bobby")]})
)
out["other_index_events"] = outcome(
    lambda: insights.push_events({"events": [click("py-alice", "blog")]})
)
out["own_profile"] = outcome(lambda: personalization.get_user_token_profile("py-alice"))
out["other_profile"] = outcome(lambda: personalization.get_user_token_profile("py-bobby"))
out["remaining_validity"] = search.get_secured_api_key_remaining_validity(key)

expired_insights, _ = clients(expired)
out["expired"] = outcome(
    lambda: expired_insights.push_events({"events": [click("py-alice")]})
)
_, tampered_personalization = clients(tampered)
out["tampered"] = outcome(
    lambda: tampered_personalization.get_user_token_profile("py-bobby")
)
print(json.dumps(out))

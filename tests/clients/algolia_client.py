"""Algolia's Python client 4.x against affinity serve: Insights events
(a purchase with objectData, URL-encoded filters, a rejected event) and the
Personalization API (strategy, profile, deletion). Prints what each call
answered as one JSON line.

Usage: python algolia_client.py HOST PORT APP KEY
"""

import json
import sys
import time

from algoliasearch.http.exceptions import RequestException
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.insights.client import InsightsClientSync
from algoliasearch.insights.config import InsightsConfig
from algoliasearch.personalization.client import PersonalizationClientSync
from algoliasearch.personalization.config import PersonalizationConfig

host, port, app, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def at_server(config):
    config.hosts = HostsCollection([Host(url=host, scheme="http", port=port)])
    return config


insights = InsightsClientSync.create_with_config(at_server(InsightsConfig(app, key)))
personalization = PersonalizationClientSync.create_with_config(
    at_server(PersonalizationConfig(app, key, "us"))
)
out = {}
out["strategy"] = personalization.set_personalization_strategy(
    {
        "eventsScoring": [
            {"eventName": "Product Bought", "eventType": "conversion", "score": 50},
            {"eventName": "Product Clicked", "eventType": "click", "score": 10},
        ],
        "facetsScoring": [{"facetName": "brand", "score": 100}],
        "personalizationImpact": 60,
    }
).to_dict()
now = int(time.time() * 1000)
out["events"] = insights.push_events(
    {
        "events": [
            {
                "eventType": "conversion",
                "eventSubtype": "purchase",
                "eventName": "Product Bought",
                "index": "products",
                "userToken": "py-buyer",
                "objectIDs": ["p1"],
                "objectData": [{"price": 9.99, "quantity": 2, "discount": "1.00"}],
                "value": 19.98,
                "currency": "USD",
                "timestamp": now,
            },
            {
                "eventType": "click",
                "eventName": "Product Clicked",
                "index": "products",
                "userToken": "py-buyer",
                "filters": ["brand%3AApple"],
                "timestamp": now,
            },
        ]
    }
).to_dict()
try:
    insights.push_events(
        {
            "events": [
                {
                    "eventType": "click",
                    "eventName": "Product Clicked",
                    "index": "products",
                    "userToken": "py-bad",
                    "filters": ["discount:10%"],
                }
            ]
        }
    )
    out["invalid"] = "accepted"
except RequestException as e:
    out["invalid"] = {"status": e.status_code, "message": str(e)}
out["profile"] = personalization.get_user_token_profile("py-buyer").to_dict()
out["deleted"] = personalization.delete_user_profile("py-buyer").to_dict()
print(json.dumps(out))
